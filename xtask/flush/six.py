# Flush-latency floor of the disk under the current directory (docs/performance.md).
import os, time
import tempfile; d=tempfile.mkdtemp(dir='.')  # on the disk under test (run it from the data root's file system)
fs=[os.open(f'{d}/s{i}', os.O_WRONLY|os.O_CREAT|os.O_APPEND) for i in range(6)]
buf=b'x'*4096
def one():
    for fd in fs: os.write(fd,buf); os.fdatasync(fd)
def single():
    os.write(fs[0],buf); os.fdatasync(fs[0])
for name,f in [('1 fdatasync',single),('6 fdatasyncs in a row',one)]:
    v=[]
    for _ in range(200):
        t=time.perf_counter(); f(); v.append(time.perf_counter()-t)
    v.sort(); print(f'{name}: p50 {v[100]*1e3:.2f} ms, p99 {v[198]*1e3:.2f} ms')
import shutil; shutil.rmtree(d, ignore_errors=True)
