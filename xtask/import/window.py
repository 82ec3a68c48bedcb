"""window.py FILE TID FROM TO [CALLER]: one thread's samples between FROM and TO seconds
after the first sample of FILE (`perf script -F comm,tid,time,ip,sym` output):
inclusive shares of the scribe/redb/lz4/blake3 functions on their stacks, or, with
CALLER, which function CALLER called directly in those samples."""
import collections, re, sys

f, tid, a, b = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
caller = sys.argv[5] if len(sys.argv) > 5 else None
OURS = ("scribe", "redb", "lz4", "blake3")
counts, n, cur, t0 = collections.Counter(), 0, None, None


def flush():
    global n
    if cur is None:
        return
    n += 1
    frames = [s for s in cur if any(o in s for o in OURS)]  # leaf first
    if caller is None:
        counts.update(set(frames))
        return
    for i, s in enumerate(frames):
        if caller in s:
            counts[frames[i - 1] if i > 0 else "(itself)"] += 1
            break


for line in open(f):
    p = line.split()
    if not p:
        continue
    head = [x for x in p if x.endswith(":") and re.match(r"^[0-9]+\.[0-9]+:$", x)]
    if head:
        flush()
        t = float(head[0].rstrip(":"))
        t0 = t if t0 is None else t0
        cur = [] if (tid in p and a <= t - t0 < b) else None
        continue
    if cur is not None and len(p) >= 2:
        s = " ".join(p[1:])
        for _ in range(4):
            s = re.sub(r"<[^<>]*>", "", s)
        cur.append(s[:100])
flush()
print("samples", n)
for k, v in counts.most_common(30):
    print(f"{100 * v / max(n, 1):5.1f}% {k}")
