//! Sector-aligned heap buffers for O_DIRECT, and a bounded free list.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Buffers currently allocated in this process (tests use it to prove that
/// error paths leak nothing).
pub fn live_buffers() -> usize {
    LIVE.load(Ordering::SeqCst)
}

/// Alignment of every I/O buffer: 4096 B satisfies O_DIRECT on 512 B and
/// 4 KiB logical-block devices alike.
pub const BUF_ALIGN: usize = 4096;

/// A heap buffer aligned to [`BUF_ALIGN`], `len` valid bytes out of `cap`.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    cap: usize,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like Vec<u8>.
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Zeroed buffer of at least `cap` bytes (rounded up to BUF_ALIGN).
    pub fn new(cap: usize) -> AlignedBuf {
        let cap = cap.max(1).div_ceil(BUF_ALIGN) * BUF_ALIGN;
        let layout = Layout::from_size_align(cap, BUF_ALIGN).expect("valid layout");
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        LIVE.fetch_add(1, Ordering::SeqCst);
        AlignedBuf { ptr, cap, len: 0 }
    }
    pub fn capacity(&self) -> usize {
        self.cap
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.cap);
        self.len = len;
    }
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    /// The full capacity, for filling.
    pub fn spare(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for cap bytes and uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap) }
    }
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len <= cap initialised (zeroed) bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.cap, BUF_ALIGN).expect("valid layout");
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), layout) }
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Free list of buffers by capacity class; holds at most `max_bytes`.
pub struct BufPool {
    free: Vec<AlignedBuf>,
    held_bytes: usize,
    max_bytes: usize,
}

impl BufPool {
    pub fn new(max_bytes: usize) -> BufPool {
        BufPool { free: Vec::new(), held_bytes: 0, max_bytes }
    }
    /// A buffer of at least `len` bytes, with `len` set.
    pub fn get(&mut self, len: usize) -> AlignedBuf {
        let mut b = match self.free.iter().rposition(|b| b.capacity() >= len && b.capacity() <= len.max(BUF_ALIGN) * 2)
        {
            Some(i) => {
                let b = self.free.swap_remove(i);
                self.held_bytes -= b.capacity();
                b
            }
            None => AlignedBuf::new(len),
        };
        b.set_len(len);
        b
    }
    pub fn put(&mut self, b: AlignedBuf) {
        if self.held_bytes + b.capacity() <= self.max_bytes {
            self.held_bytes += b.capacity();
            self.free.push(b);
        }
    }
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }
}
