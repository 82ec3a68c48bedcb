#!/usr/bin/env bash
# The S3 tier's cold read through the real `scribe` client (issue 20):
# submit MIB MiB of 3 MiB random files under `--ack durable`, then time
# `scribe workspace create` from a cold cache (the local store evicted by
# `tier evict`, a fresh server) and then warm, RUNS rounds, printing
# radosgw's GET count beside each cold one (its admin socket), radosgw's
# own GET rate (16 MiB objects, 8 in flight, over MIB MiB) measured
# right before each cold read, and each round's cold/warm ratio and the
# issue's figure, cold / min(warm, S3 GET).
#
#   CEPH_DIR=/tmp/ceph-bench RGW_MEMSTORE_BYTES=10737418240 .ci/start-rgw.sh
#   cargo build --release -p scribe-cli -p scribe-server --features scribe-server/cli
#   scribe-server/benches/tier-workspace.sh [MIB [RUNS]]
#
# Env: BIN (default target/release), SERVER (another scribe-server, for
# A/B), RATES (the tier bench binary, which measures radosgw's own rates:
# `cargo bench -p scribe-server --features cli --bench tier --no-run`
# prints its path; default the newest target/release/deps/tier-*; none:
# the GET rate is not measured), PERF_DIR (a directory: `perf record -g` of the server during
# each cold run, cold<i>.data), CLIENT_PERF (a directory: `perf record -g`
# of the client during each run, cold<i>.data and warm<i>.data), CEPH_DIR (default /tmp/ceph-bench), S3_ENDPOINT (default
# http://127.0.0.1:7480), AWS_* keys (default start-rgw.sh's), WORK
# (default /tmp/scribe-tier-workspace, removed first), S3_PIDS (the S3
# server's processes, for its CPU; default radosgw's and its OSD's),
# RATES_CLEAN=1 (delete the rate measure's objects after each one).
set -euo pipefail
MIB=${1:-2048}; RUNS=${2:-3}
BIN=${BIN:-target/release}; SERVER=${SERVER:-$BIN/scribe-server}
CEPH_DIR=${CEPH_DIR:-/tmp/ceph-bench}
W=${WORK:-/tmp/scribe-tier-workspace}
export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-AKEXAMPLE}
export AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-SKEXAMPLE}
export AWS_REGION=${AWS_REGION:-us-east-1}
RATES=${RATES:-$(ls -t "${CARGO_TARGET_DIR:-target}"/release/deps/tier-* 2>/dev/null | grep -v '\.d$' | head -1 || true)}
# radosgw's own GET rate in MiB/s (0: not measured). Its objects stay in
# the bucket between rounds and are deleted at the end.
get_rate() {
    [ -n "$RATES" ] || { echo 0; return; }
    SCRIBE_TEST_S3_ENDPOINT=${S3_ENDPOINT:-http://127.0.0.1:7480} "$RATES" rates "$MIB" |
        awk '/^S3 GET 16 MiB x 8 in flight:/ {print int($9)}'
    # A server that refuses a create-if-absent PUT over an existing key
    # with an error instead of 412 (s3s-fs): delete them after each measure.
    [ "${RATES_CLEAN:-0}" = 1 ] &&
        SCRIBE_TEST_S3_ENDPOINT=${S3_ENDPOINT:-http://127.0.0.1:7480} "$RATES" rates-clean "$MIB" >/dev/null
    true
}
TIER=(--tier "s3://${S3_BUCKET:-test}/tier-workspace-$(date +%s)" --tier-endpoint "${S3_ENDPOINT:-http://127.0.0.1:7480}")
rm -rf "$W"; mkdir -p "$W"
PID=
serve() {
    "$SERVER" serve --data "$W/data" --listen 127.0.0.1:0 --runtime-dir "$W/run" "${TIER[@]}" \
        --ack durable >"$W/serve.log" 2>&1 &
    PID=$!
    for _ in $(seq 100); do [ -s "$W/run/listen" ] && break; sleep 0.1; done
    ADDR=$(cat "$W/run/listen")
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; rm -f "$W/run/listen"; }
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; true' EXIT
gets() {
    ceph --admin-daemon "$CEPH_DIR/run/client.rgw.a.asok" perf dump rgw 2>/dev/null |
        python3 -c "import json,sys; d=json.load(sys.stdin)['rgw']; print(d['get'], d['get_b'])" || echo "0 0"
}
# The server's CPU time (all threads), context switches and page faults
# so far.
srv_cpu() {
    local hz ticks sw faults
    hz=$(getconf CLK_TCK)
    read -r ticks faults < <(awk '{print $14 + $15, $10}' "/proc/$PID/stat")
    sw=$(cat /proc/"$PID"/task/*/status | awk '/ctxt_switches/ {n += $2} END {print n}')
    echo "server $(echo "scale=2; $ticks / $hz" | bc) core-s $sw switches $faults faults"
}
secs() { local t=$(date +%s.%N); "$@" >/dev/null 2>&1; printf "%.2f" "$(echo "$(date +%s.%N) - $t" | bc)"; }
# "WALL CPU": the command's wall time and its CPU time (user + system),
# in s. With CLIENT_PERF=DIR the command runs under `perf record -g`
# into DIR/NAME.data (NAME the first argument; the CPU time is then
# perf's and the client's together).
timed() {
    local name=$1; shift
    [ -n "${CLIENT_PERF:-}" ] && set -- perf record -q -g -o "$CLIENT_PERF/$name.data" -- "$@"
    python3 -c '
import resource, subprocess, sys, time
t = time.monotonic()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{time.monotonic() - t:.2f} {r.ru_utime + r.ru_stime:.2f}+{r.ru_stime:.2f}")' "$@"
}
# CPU seconds radosgw and its OSD (or the processes S3_PIDS names: another
# S3 server) have used so far.
rgw_cpu() {
    local hz=$(getconf CLK_TCK) t=0 p
    for p in ${S3_PIDS:-$(cat "$CEPH_DIR/run/client.rgw.a.pid" "$CEPH_DIR/run/osd.0.pid" 2>/dev/null)}; do
        t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
    done
    echo "scale=2; $t / $hz" | bc
}

"$BIN/scribe-server" init --data "$W/data" >/dev/null
"$BIN/scribe-server" repo create --data "$W/data" game >/dev/null
serve
"$BIN/scribe" workspace create "$W/src" --server "scribe://$ADDR" --repo game >/dev/null
python3 -c "
import os
for i in range($MIB // 3):
    open(f'$W/src/f{i:05}.bin', 'wb').write(os.urandom(3 << 20))"
(cd "$W/src" && "$BIN/scribe" add . >/dev/null)
echo "durable submit of $MIB MiB: $(cd "$W/src" && secs "$BIN/scribe" submit -m big) s"
stop
# Each round: a cold workspace (the store evicted, a fresh server), the
# write-back (it puts every object back into the local store once reads
# are quiet; its backlog is in the status file), then a warm workspace
# from a fresh server again. Cold and warm alternate, so each pair meets the
# machine in the same state (on a VM the cost of the client's page-cache
# writes moves by 2-3x with the host's memory; docs/performance.md).
written_back() {
    sleep 3
    for _ in $(seq 180); do
        grep -q "write-back-pending 0 " "$W/data/tier/status" 2>/dev/null && return
        sleep 1
    done
}
# On this VM (virtio-balloon free page reporting, DAMON) page-cache pages
# freed more than a few seconds ago cost 3-4x more to write into than
# pages just freed: a loop of 64 MiB writes ran at 410 MB/s or at 1.9
# GB/s with that state alone, and the client's system time for one
# workspace moved between 1.1 and 3.6 s. Each timed run therefore starts
# right after MIB+512 MiB were written and deleted on the same file
# system, so cold and warm meet the same pages. PRIME=0 skips it.
prime() {
    [ "${PRIME:-1}" = 0 ] && return
    dd if=/dev/zero of="$W/.prime" bs=4M count=$(((MIB + 512) / 4)) conv=fsync status=none
    rm -f "$W/.prime"
}
ratios=(); figures=()
for i in $(seq "$RUNS"); do
    "$BIN/scribe-server" tier evict --data "$W/data" "${TIER[@]}" >/dev/null 2>&1
    sync
    get=$(get_rate)
    serve
    prime
    read -r g0 b0 < <(gets)
    [ -n "${PERF_DIR:-}" ] && { perf record -q -g -p "$PID" -o "$PERF_DIR/cold$i.data" 2>/dev/null & PERF=$!; }
    r0=$(rgw_cpu)
    read -r c ccpu < <(timed "cold$i" "$BIN/scribe" workspace create "$W/cold$i" --server "scribe://$ADDR" --repo game)
    rcpu=$(echo "$(rgw_cpu) - $r0" | bc)
    [ -n "${PERF_DIR:-}" ] && { kill -INT "$PERF"; wait "$PERF" || true; }
    read -r g1 b1 < <(gets)
    cpu=$(srv_cpu)
    rm -rf "$W/cold$i"
    written_back
    waited=$(grep -o "waited [0-9]* waited-ms [0-9]*" "$W/data/tier/status" || true)
    stop
    sync    # the write-back's pages reach the disk before the warm run
    serve   # a fresh server, as for the cold run
    prime
    read -r w wccpu < <(timed "warm$i" "$BIN/scribe" workspace create "$W/warm$i" --server "scribe://$ADDR" --repo game)
    wcpu=$(srv_cpu)
    rm -rf "$W/warm$i"
    r=$(echo "100 * $w / $c" | bc)
    ratios+=("$r")
    # The issue's figure: cold / min(warm, radosgw's GET), in MiB/s.
    f=$(python3 -c "c, w, g = $MIB / $c, $MIB / $w, $get; print(round(100 * c / (min(w, g) if g else w)))")
    figures+=("$f")
    echo "round $i: S3 GET $get MiB/s; cold $c s ($(echo "$MIB / $c" | bc) MiB/s; radosgw GETs $((g1 - g0)) of $(((b1 - b0) / 1048576)) MiB; reads $waited; client $ccpu (system) core-s, $cpu, radosgw+osd $rcpu core-s), warm $w s ($(echo "$MIB / $w" | bc) MiB/s; client $wccpu (system) core-s, $wcpu): cold/warm $r %, cold/min(warm, GET) $f %"
    stop
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "cold/warm per round: ${ratios[*]} %; median $(median "${ratios[@]}") %"
echo "cold/min(warm, S3 GET) per round: ${figures[*]} %; median $(median "${figures[@]}") %"
[ -n "$RATES" ] && SCRIBE_TEST_S3_ENDPOINT=${S3_ENDPOINT:-http://127.0.0.1:7480} "$RATES" rates-clean "$MIB" >/dev/null
serve
grep reads "$W/data/tier/status" || true
stop
