"""timeline.py FILE SERVER_PID [BIN_SECONDS]: a whole-machine sample file of an import
(`perf script -F comm,pid,tid,time,ip,sym` of `profile-system.sh`'s recording) as a timeline
from the client's first sample to its last: samples per bin (1,999 per second per CPU) of the
idle CPUs, the client's threads (C:) and the server's (S:), then the server's threads by id.
Where one column is idle while another runs alone, the import is serial."""
import collections
import re
import sys

f, server = sys.argv[1], sys.argv[2]
width = float(sys.argv[3]) if len(sys.argv) > 3 else 0.05
rows = []
for line in open(f):
    m = re.match(r"\s*(.+?)\s+(\d+)/(\d+)\s+([\d.]+):", line)
    if m:
        rows.append((float(m.group(4)), m.group(1), m.group(2), m.group(3)))
clients = {r[2] for r in rows if r[2] != server and r[1] == "scribe"}
if not clients:
    sys.exit("no client samples (a process named scribe other than the server)")
t0 = min(r[0] for r in rows if r[2] in clients)
t1 = max(r[0] for r in rows if r[2] in clients)
print(f"client window {t1 - t0:.3f} s")


def table(key_of):
    bins, total = collections.defaultdict(collections.Counter), collections.Counter()
    for t, comm, pid, tid in rows:
        if t0 <= t <= t1:
            k = key_of(comm, pid, tid)
            if k:
                bins[int((t - t0) / width)][k] += 1
                total[k] += 1
    keys = [k for k, _ in total.most_common(10)]
    for k in keys:
        print(f"  {k:<30} {total[k]:6d} samples  {total[k] / 1999:.3f} s")
    print("  ms    " + " ".join(f"{k[-9:]:>9}" for k in keys))
    for b in sorted(bins):
        print(f"{b * width * 1000:6.0f}  " + " ".join(f"{bins[b][k]:9d}" for k in keys))


def who(comm, pid, tid):
    if comm == "swapper":
        return "idle"
    side = "S:" if pid == server else "C:" if pid in clients else "o:"
    return side + comm


table(who)
print("server threads:")
table(lambda comm, pid, tid: tid if pid == server else None)
