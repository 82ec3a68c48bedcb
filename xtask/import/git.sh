#!/bin/bash
# git.sh TREE LABEL
# SCRATCH (default /tmp/scribe-import) holds the runs; QUIET may name a wrapper run around each timed command.
set -e
T=$1; L=$2
W=${SCRATCH:-/tmp/scribe-import}/git-$L; rm -rf $W; mkdir -p $W/ws
cd $W/ws; git init -q; cp -a $T/. $W/ws/; sync
s=$(date +%s.%N)
${QUIET:-} bash -c 'git add -A && git -c user.name=x -c user.email=x@x commit -qm import'
e=$(date +%s.%N)
n=$(find $T -type f | wc -l)
python3 -c "print(f'git $L {$e-$s:.2f}s files/s {$n/($e-$s):.0f}')"
