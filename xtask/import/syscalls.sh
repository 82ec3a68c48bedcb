#!/bin/bash
# syscalls.sh TREE BINDIR [PORT] : import TREE over TCP and count the client's system calls during
# the submit (strace -f -c, every thread), then the client's CPU time, page faults and context
# switches in a second, untraced import (perf stat). Counts are exact where times are noisy: a
# change that removes calls per file shows here whatever the machine is doing.
set -e
T=$1; B=$(cd "$2" && pwd); PORT=${3:-47313}
OUT=$(mktemp -d)
(
  source "$(cd "$(dirname "$0")" && pwd)/server-workspace.sh"
  $B/scribe add . > /dev/null 2>&1
  strace -f -c -o $OUT/strace $B/scribe submit -m import > /dev/null 2> $OUT/err || { cat $OUT/err; exit 1; }
)
head -14 $OUT/strace
(
  source "$(cd "$(dirname "$0")" && pwd)/server-workspace.sh"
  $B/scribe add . > /dev/null 2>&1
  perf stat -x, -e task-clock,page-faults,context-switches -o $OUT/stat $B/scribe submit -m import > /dev/null 2> $OUT/err || { cat $OUT/err; exit 1; }
)
grep -v '^#' $OUT/stat | awk -F, 'NF > 2 {printf "%s %s  ", $1, $3} END {print ""}'
rm -rf $OUT
