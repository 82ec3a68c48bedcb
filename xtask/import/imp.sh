#!/bin/bash
# imp.sh TREE BINDIR LABEL PORT : fresh server + workspace, copy TREE in, sync, time add + submit.
# SCRATCH (default /tmp/scribe-import) holds the runs; QUIET may name a wrapper run around each timed command.
# It also prints the CPU time each side spent in add + submit (the server's utime + stime from /proc, Linux; the client's from bash's `times`).
# TLS_CERT and TLS_KEY (the server's PEM files) run it over TLS (scribes://); SCRIBE_CA_FILE names the CA the client trusts.
set -e
T=$1; B=$2; L=$3; PORT=${4:-47123}
W=${SCRATCH:-/tmp/scribe-import}/run-$L; rm -rf $W; mkdir -p $W
$B/scribe-server init --data $W/d >/dev/null; $B/scribe-server repo create --data $W/d r >/dev/null 2>&1 || $B/scribe-server repo create r --data $W/d >/dev/null
TLS=(); SCHEME=scribe
if [ -n "${TLS_CERT:-}" ]; then TLS=(--tls-cert "$TLS_CERT" --tls-key "$TLS_KEY"); SCHEME=scribes; fi
$B/scribe-server serve --data $W/d --listen 127.0.0.1:$PORT "${TLS[@]}" --runtime-dir $W/r > $W/server.log 2>&1 &
SP=$!
trap "kill $SP 2>/dev/null; wait $SP 2>/dev/null" EXIT
for i in $(seq 50); do $B/scribe workspace create $W/ws --server $SCHEME://127.0.0.1:$PORT --repo r >/dev/null 2>&1 && break; sleep 0.2; done
[ -d $W/ws/.scribe ] || { echo "workspace create failed"; cat $W/server.log; exit 1; }
cp -a $T/. $W/ws/
sync
cd $W/ws
cpu() { awk '{print $14+$15}' /proc/$SP/stat 2>/dev/null || echo 0; }
# `times` in this shell (not a subshell): the children's CPU so far.
kids() { tail -1 $W/times | awk '{n=0; for(i=1;i<=2;i++){split($i,t,"m"); sub("s","",t[2]); n+=t[1]*60+t[2]} print n}'; }
times > $W/times; c0=$(cpu); k0=$(kids); s=$(date +%s.%N)
${QUIET:-} $B/scribe add . > $W/add.out
a=$(date +%s.%N)
${QUIET:-} $B/scribe submit -m import > $W/submit.out
e=$(date +%s.%N); times > $W/times; c1=$(cpu); k1=$(kids); tk=$(getconf CLK_TCK)
n=$(find $T -type f | wc -l)
python3 - <<PY
s,a,e,n=$s,$a,$e,$n
print(f"$L add {a-s:.2f}s submit {e-a:.2f}s total {e-s:.2f}s files/s {n/(e-s):.0f}")
print(f"$L cpu: server {($c1-$c0)/$tk:.2f}s client {$k1-$k0:.2f}s")
PY
tail -2 $W/submit.out
du -sh $W/d $W/ws/.scribe/_state/cache | tr '\n' ' '; echo
