#!/bin/bash
# profile-system.sh TREE BINDIR OUT.perf [PORT] : import TREE over TCP (add + submit) with the
# whole machine sampled (perf record -a, 1,999 Hz per CPU, no call graphs): where each core's
# time goes, the client's, the server's and the idle ones. Prints add and submit times and the
# server's pid. Then: perf script -i OUT.perf -F comm,pid,tid,time,ip,sym > OUT.txt and
#       python3 xtask/import/timeline.py OUT.txt SERVER_PID   (50 ms bins per process and thread)
set -e
T=$1; B=$(cd "$2" && pwd); OUT=$(realpath -m "$3"); PORT=${4:-47309}
source "$(cd "$(dirname "$0")" && pwd)/server-workspace.sh"
perf record -q -a -F 1999 -o $OUT 2>/dev/null &
PP=$!
sleep 0.5
s=$(date +%s.%N); $B/scribe add . > /dev/null; a=$(date +%s.%N)
$B/scribe submit -m import > /dev/null; e=$(date +%s.%N)
sleep 0.1
kill -INT $PP; wait $PP || true
echo "add $(echo "$a - $s" | bc) s, submit $(echo "$e - $a" | bc) s; server pid $SP"
