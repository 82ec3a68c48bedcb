#!/bin/bash
# profile-system.sh TREE BINDIR OUT.perf [PORT] : import TREE over TCP (add + submit) with the
# whole machine sampled (perf record -a, 1,999 Hz per CPU, no call graphs): where each core's
# time goes, the client's, the server's and the idle ones. Prints add and submit times and the
# server's pid. Then: perf script -i OUT.perf -F comm,pid,tid,time,ip,sym > OUT.txt and
#       python3 xtask/import/timeline.py OUT.txt SERVER_PID   (50 ms bins per process and thread)
set -e
T=$1; B=$(cd "$2" && pwd); OUT=$(realpath -m "$3"); PORT=${4:-47309}
W=$(mktemp -d); trap 'kill $SP 2>/dev/null; wait $SP 2>/dev/null; rm -rf $W' EXIT
$B/scribe-server init --data $W/d >/dev/null; $B/scribe-server repo create r --data $W/d >/dev/null
$B/scribe-server serve --data $W/d --listen 127.0.0.1:$PORT --runtime-dir $W/r > $W/server.log 2>&1 &
SP=$!
for i in $(seq 50); do $B/scribe workspace create $W/ws --server scribe://127.0.0.1:$PORT --repo r >/dev/null 2>&1 && break; sleep 0.2; done
cp -a $T/. $W/ws/; sync; cd $W/ws
perf record -q -a -F 1999 -o $OUT 2>/dev/null &
PP=$!
sleep 0.5
s=$(date +%s.%N); $B/scribe add . > /dev/null; a=$(date +%s.%N)
$B/scribe submit -m import > /dev/null; e=$(date +%s.%N)
sleep 0.1
kill -INT $PP; wait $PP || true
echo "add $(echo "$a - $s" | bc) s, submit $(echo "$e - $a" | bc) s; server pid $SP"
