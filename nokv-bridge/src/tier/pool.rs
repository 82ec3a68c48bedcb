//! Reusable buffers for the bodies of bucket GETs.
//!
//! A cold read GETs one block (up to 16 MiB) after another. Collected into
//! a new allocation each, every body landed in freshly mapped pages that
//! the kernel faulted in and zeroed first: 190-260 k page faults per 2 GiB
//! cold read, 86 % of them in the body's copy (docs/performance.md, "Body
//! buffers"). A body here is copied into a buffer given back when the last
//! object sliced from it is dropped ([`bytes::Bytes::from_owner`]), so the
//! next GET writes into pages that are already there.
//!
//! The pool keeps at most `max_bytes` of free buffers and gives them all
//! back to the allocator once no body was taken for [`IDLE`]
//! ([`BodyPool::trim_if_idle`]): an idle server holds nothing for it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

/// Free buffers are dropped once no body was taken for this long.
pub const IDLE: Duration = Duration::from_secs(10);

/// Buffers smaller than this are not kept (the allocator reuses small
/// sizes well by itself).
const MIN_POOLED: usize = 256 << 10;

/// Free body buffers, bounded.
pub struct BodyPool {
    inner: Mutex<Inner>,
    max_bytes: usize,
}

struct Inner {
    free: Vec<Vec<u8>>,
    /// Capacity of the buffers in `free`.
    bytes: usize,
    last_take: Instant,
}

impl BodyPool {
    /// A pool keeping at most `max_bytes` of free buffers.
    pub fn new(max_bytes: usize) -> Arc<BodyPool> {
        Arc::new(BodyPool {
            inner: Mutex::new(Inner {
                free: Vec::new(),
                bytes: 0,
                last_take: Instant::now(),
            }),
            max_bytes,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An empty buffer with room for `len` bytes: the smallest free one
    /// that fits and is at most twice as large (a larger one would hold
    /// memory a small body does not use), else a new one.
    pub fn take(&self, len: usize) -> Vec<u8> {
        let mut p = self.lock();
        p.last_take = Instant::now();
        let best = p
            .free
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= len && b.capacity() / 2 <= len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        match best {
            Some(i) => {
                let b = p.free.swap_remove(i);
                p.bytes -= b.capacity();
                b
            }
            None => Vec::with_capacity(len),
        }
    }

    /// `buf` is free again: kept while the pool has room, else dropped.
    fn give_back(&self, mut buf: Vec<u8>) {
        let cap = buf.capacity();
        if cap < MIN_POOLED {
            return;
        }
        buf.clear();
        let mut p = self.lock();
        if p.bytes + cap <= self.max_bytes {
            p.bytes += cap;
            p.free.push(buf);
        }
    }

    /// `buf` (filled) as `Bytes`; its memory comes back to the pool when
    /// the last slice of it is dropped.
    pub fn bytes(self: &Arc<Self>, buf: Vec<u8>) -> Bytes {
        if buf.capacity() < MIN_POOLED {
            return Bytes::from(buf);
        }
        Bytes::from_owner(Pooled {
            buf,
            pool: self.clone(),
        })
    }

    /// Drop every free buffer when none was taken for `idle`. Returns the
    /// bytes given back to the allocator.
    pub fn trim_if_idle(&self, idle: Duration) -> usize {
        let mut p = self.lock();
        if p.last_take.elapsed() < idle {
            return 0;
        }
        let n = p.bytes;
        p.free = Vec::new();
        p.bytes = 0;
        n
    }

    /// Bytes of free buffers held.
    #[cfg(test)]
    pub fn free_bytes(&self) -> usize {
        self.lock().bytes
    }
}

/// A filled body buffer owned by the `Bytes` made of it.
struct Pooled {
    buf: Vec<u8>,
    pool: Arc<BodyPool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.pool.give_back(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    fn filled(pool: &Arc<BodyPool>, len: usize, byte: u8) -> Bytes {
        let mut b = pool.take(len);
        b.resize(len, byte);
        pool.bytes(b)
    }

    #[test]
    fn a_body_buffer_is_reused_once_every_slice_of_it_is_dropped() {
        let pool = BodyPool::new(64 * MIB);
        let body = filled(&pool, 16 * MIB, 7);
        let ptr = body.as_ptr();
        let object = body.slice(MIB..2 * MIB);
        drop(body);
        // A slice still holds the buffer.
        assert_eq!(pool.free_bytes(), 0);
        assert!(object.iter().all(|&b| b == 7));
        drop(object);
        assert!(pool.free_bytes() >= 16 * MIB);
        let again = pool.take(15 * MIB);
        assert_eq!(again.as_ptr(), ptr, "the freed buffer is taken again");
        assert!(again.is_empty());
        assert_eq!(pool.free_bytes(), 0);
    }

    #[test]
    fn the_pool_keeps_no_more_than_its_bound_and_no_oversized_buffer_for_a_small_body() {
        let pool = BodyPool::new(40 * MIB);
        let bodies: Vec<Bytes> = (0..3).map(|i| filled(&pool, 16 * MIB, i)).collect();
        drop(bodies);
        // Two of the three fit in 40 MiB; the third went to the allocator.
        let free = pool.free_bytes();
        assert!((32 * MIB..=40 * MIB).contains(&free), "{free}");
        // A 1 MiB body does not take a 16 MiB buffer.
        let small = pool.take(MIB);
        assert!(small.capacity() < 2 * MIB);
        assert_eq!(pool.free_bytes(), free);
        // Small buffers are not pooled at all.
        drop(filled(&pool, 1000, 1));
        assert_eq!(pool.free_bytes(), free);
    }

    #[test]
    fn an_idle_pool_gives_its_buffers_back() {
        let pool = BodyPool::new(64 * MIB);
        drop(filled(&pool, 16 * MIB, 1));
        assert!(pool.free_bytes() > 0);
        // Taken just now: not idle.
        assert_eq!(pool.trim_if_idle(Duration::from_secs(60)), 0);
        assert!(pool.free_bytes() > 0);
        std::thread::sleep(Duration::from_millis(20));
        assert!(pool.trim_if_idle(Duration::from_millis(10)) >= 16 * MIB);
        assert_eq!(pool.free_bytes(), 0);
    }
}
