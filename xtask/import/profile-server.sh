#!/bin/bash
# profile-server.sh TREE BINDIR OUT.perf [PORT] : import TREE over TCP with the server sampled
# (perf record, 1,999 Hz, dwarf call graphs) during the submit; prints the submit's time.
# Then: perf script -i OUT.perf -F comm,tid,time,ip,sym > OUT.txt and
#       python3 xtask/import/window.py OUT.txt TID FROM TO   (one thread's functions in a time window)
set -e
T=$1; B=$(cd "$2" && pwd); OUT=$(realpath -m "$3"); PORT=${4:-47307}
source "$(cd "$(dirname "$0")" && pwd)/server-workspace.sh"
$B/scribe add . > /dev/null
perf record -q -F 1999 --call-graph dwarf,32768 -p $SP -o $OUT 2>/dev/null &
PP=$!
sleep 0.5
s=$(date +%s.%N); $B/scribe submit -m import > /dev/null; e=$(date +%s.%N)
kill -INT $PP; wait $PP || true
echo "submit $(echo "$e - $s" | bc) s; server pid $SP"
