#!/bin/sh
# scribe move / move --abort at the 50,000-tracked-file bound (path server).
set -e
S=${SCRIBE:-$(cd "$(dirname "$0")/../.." && pwd)/target/release/scribe}
N=${N:-50000}
D=$(mktemp -d /tmp/scribe-move-bench.XXXXXX)
cd "$D"
export SCRIBE_AUTHOR=bench HOME="$D"
$S -q repo create demo --server "$D/server" >/dev/null
$S -q workspace create ws --server "$D/server" --repo demo >/dev/null
cd ws
python3 - "$N" <<'PY'
import os, sys
n = int(sys.argv[1])
for i in range(n):
    d = f"src/d{i % 500:03d}"
    os.makedirs(d, exist_ok=True)
    with open(f"{d}/f{i:06d}.bin", "wb") as f:
        f.write(os.urandom(100))
PY
/usr/bin/time -f "add: %e s" $S -q add src >/dev/null
/usr/bin/time -f "submit: %e s" $S -q submit -m base >/dev/null
echo "nproc: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/time -f "floor, find -type f over the tree: %e s" find src -type f | wc -l
/usr/bin/time -f "floor, scribe status (stat-only walk): %e s" $S -q status >/dev/null
for i in 1 2 3; do
  /usr/bin/time -f "move $i: %e s (user %U, sys %S)" $S -q move src dst >/dev/null
  /usr/bin/time -f "abort $i: %e s (user %U, sys %S)" $S -q move --abort >/dev/null
done
du -sh .scribe/_state/state.redb
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
cd /; rm -rf "$D"
