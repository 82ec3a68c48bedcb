# Archive cursor write: create+rename (a) against reuse+RENAME_EXCHANGE (b) (docs/performance.md).
import os, time, ctypes, statistics
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD=-100; RENAME_EXCHANGE=2
import tempfile; d=tempfile.mkdtemp(dir="."); os.makedirs(d, exist_ok=True)
dfd=os.open(d, os.O_RDONLY)
def a():
    fd=os.open(d+"/HEAD.tmp", os.O_WRONLY|os.O_CREAT|os.O_TRUNC, 0o644)
    os.write(fd, b"x"*112); os.fdatasync(fd); os.close(fd)
    os.rename(d+"/HEAD.tmp", d+"/HEAD"); os.fsync(dfd)
def b():
    fd=os.open(d+"/HEAD.tmp", os.O_WRONLY|os.O_CREAT, 0o644)
    os.pwrite(fd, b"y"*112, 0); os.fdatasync(fd); os.close(fd)
    r=libc.renameat2(AT_FDCWD, (d+"/HEAD.tmp").encode(), AT_FDCWD, (d+"/HEAD").encode(), RENAME_EXCHANGE)
    assert r==0, ctypes.get_errno()
    os.fsync(dfd)
for f in (a,b,a,b):
    ts=[]
    for i in range(400):
        t=time.perf_counter(); f(); ts.append(time.perf_counter()-t)
    print(f.__name__, "p50 %.3f ms"%(statistics.median(ts)*1000))
import shutil; shutil.rmtree(d, ignore_errors=True)
