//! The `mmap`, `mmap-default` and `memory` engines: reads are copies out of
//! a mapping (page faults through the page cache) or out of RAM.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use crate::aligned::AlignedBuf;
use crate::engine::{resident_at, Done, IoCounters, ReadEngine, ReadReq};
use crate::IoError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `mmap` + `madvise(MADV_RANDOM)`: the tuned page-cache baseline.
    MmapRandom,
    /// `mmap` with kernel defaults (readahead on): what most users run.
    MmapDefault,
    /// Whole files read into RAM at open.
    Memory,
}

struct Map {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is read-only and lives as long as the engine.
unsafe impl Send for Map {}

enum Source {
    Mapped(Map),
    Owned(Arc<Vec<u8>>),
}

/// Files the `memory` engine has loaded in this process, by identity
/// (device, inode, length, mtime). Every sampler of a process — the loader's,
/// each producer's, each epoch's — shares one copy instead of reading the
/// whole dataset into RAM again; the copy is freed with its last engine.
/// A dataset replaced by a rebuild is a new inode, so it is loaded afresh.
type FileKey = (u64, u64, u64, i64, i64);
static LOADED: Mutex<Vec<(FileKey, Weak<Vec<u8>>)>> = Mutex::new(Vec::new());

/// The whole of the open file `f` (at `p`, described by `meta`), shared with
/// other engines that loaded the same file.
fn load_shared(f: &std::fs::File, p: &Path, meta: &std::fs::Metadata) -> Result<Arc<Vec<u8>>, IoError> {
    use std::os::unix::fs::MetadataExt;
    let key: FileKey = (meta.dev(), meta.ino(), meta.len(), meta.mtime(), meta.mtime_nsec());
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    loaded.retain(|(_, w)| w.strong_count() > 0);
    if let Some(a) = loaded.iter().find(|(k, _)| *k == key).and_then(|(_, w)| w.upgrade()) {
        return Ok(a);
    }
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(meta.len() as usize)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))
        .map(|_| advise_huge(&mut bytes))
        .and_then(|_| std::io::Read::read_to_end(&mut &*f, &mut bytes))
        .map_err(|e| IoError::new("reading", p, None, e))?;
    let a = Arc::new(bytes);
    loaded.push((key, Arc::downgrade(&a)));
    Ok(a)
}

/// Ask for transparent huge pages over `v`'s reserved (not yet touched)
/// capacity. Samplers read the `memory` engine's copies (and the cache's
/// static arena) at random: with 4 KiB pages nearly every slot and row costs
/// a TLB miss besides its cache miss (a 1.2 GiB graph.fg spans 300 Ki pages,
/// 600 with 2 MiB ones). Advice only: where THP is off (or the kernel
/// refuses) the bytes are the same and merely slower to reach. numpy gives
/// its large arrays the same advice (so PyG's tensors have it too).
pub fn advise_huge<T>(v: &mut Vec<T>) {
    const HUGE: usize = 2 << 20;
    let start = v.as_mut_ptr() as usize;
    let lo = start.next_multiple_of(HUGE);
    let hi = (start + v.capacity() * std::mem::size_of::<T>()) / HUGE * HUGE;
    if hi > lo {
        // SAFETY: [lo, hi) lies inside `v`'s allocation; MADV_HUGEPAGE
        // changes no contents, only how pages are backed.
        unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) };
    }
}

impl Source {
    fn bytes(&self) -> &[u8] {
        match self {
            // SAFETY: ptr/len describe a live PROT_READ mapping (or len 0).
            Source::Mapped(m) if m.len > 0 => unsafe { std::slice::from_raw_parts(m.ptr, m.len) },
            Source::Mapped(_) => &[],
            Source::Owned(v) => v.as_slice(),
        }
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        if let Source::Mapped(m) = self {
            if m.len > 0 {
                // SAFETY: unmapping exactly what mmap returned.
                unsafe { libc::munmap(m.ptr as *mut libc::c_void, m.len) };
            }
        }
    }
}

pub struct MappedEngine {
    mode: Mode,
    sources: Vec<Source>,
    paths: Vec<PathBuf>,
    ready: Vec<Done>,
    counters: IoCounters,
}

impl MappedEngine {
    pub fn open(paths: &[PathBuf], mode: Mode) -> Result<MappedEngine, IoError> {
        use std::os::unix::io::AsRawFd;
        let mut sources = Vec::new();
        for p in paths {
            let f = crate::regular::open_regular(p)?;
            let meta = f.metadata().map_err(|e| IoError::new("stat", p, None, e))?;
            let len = meta.len() as usize;
            sources.push(match mode {
                Mode::Memory => Source::Owned(load_shared(&f, p, &meta)?),
                _ if len == 0 => Source::Mapped(Map { ptr: std::ptr::null_mut(), len: 0 }),
                _ => {
                    // SAFETY: mapping a regular file read-only; checked for MAP_FAILED.
                    let ptr = unsafe {
                        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0)
                    };
                    if ptr == libc::MAP_FAILED {
                        return Err(IoError::new("mmap", p, None, std::io::Error::last_os_error()));
                    }
                    if mode == Mode::MmapRandom {
                        // SAFETY: advising on the mapping just created.
                        unsafe { libc::madvise(ptr, len, libc::MADV_RANDOM) };
                    }
                    Source::Mapped(Map { ptr: ptr as *mut u8, len })
                }
            });
        }
        Ok(MappedEngine { mode, sources, paths: paths.to_vec(), ready: Vec::new(), counters: IoCounters::default() })
    }
}

impl ReadEngine for MappedEngine {
    fn name(&self) -> &'static str {
        match self.mode {
            Mode::MmapRandom => "mmap",
            Mode::MmapDefault => "mmap-default",
            Mode::Memory => "memory",
        }
    }
    fn depth(&self) -> usize {
        1
    }
    /// Finished but not yet reaped: counting them keeps a caller that fills
    /// up to `depth()` from queueing every buffer of a batch at once.
    fn in_flight(&self) -> usize {
        self.ready.len()
    }
    fn submit(&mut self, req: ReadReq, mut buf: AlignedBuf) -> Result<(), IoError> {
        self.counters.record(req.len, self.ready.len() + 1);
        let src = self.sources[req.file as usize].bytes();
        let data = resident_at(src, &self.paths[req.file as usize], req.offset, req.len)?;
        buf.set_len(data.len());
        buf.spare()[..data.len()].copy_from_slice(data);
        self.ready.push(Done { req, buf });
        Ok(())
    }
    fn complete(&mut self, _min: usize, out: &mut Vec<Done>) -> Result<(), IoError> {
        out.append(&mut self.ready);
        Ok(())
    }
    fn counters(&self) -> &IoCounters {
        &self.counters
    }
    fn path(&self, file: u16) -> &Path {
        &self.paths[file as usize]
    }
    /// The `memory` engine's own copy (mappings are not handed out: a page
    /// fault there is I/O the caller must see as a read).
    fn resident(&self, file: u16) -> Option<Arc<Vec<u8>>> {
        match self.sources.get(file as usize)? {
            Source::Owned(a) => Some(a.clone()),
            Source::Mapped(_) => None,
        }
    }
}

#[cfg(test)]
mod sharing_tests {
    use super::*;

    fn owned(e: &MappedEngine) -> &Arc<Vec<u8>> {
        match &e.sources[0] {
            Source::Owned(a) => a,
            Source::Mapped(_) => panic!("memory engine must own its bytes"),
        }
    }

    #[test]
    fn memory_engines_of_a_process_share_one_copy_until_the_file_is_replaced() {
        let dir = std::env::temp_dir().join(format!("flashgnn-share-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("data.bin");
        std::fs::write(&p, vec![7u8; 8192]).unwrap();
        let a = MappedEngine::open(std::slice::from_ref(&p), Mode::Memory).unwrap();
        let b = MappedEngine::open(std::slice::from_ref(&p), Mode::Memory).unwrap();
        assert!(Arc::ptr_eq(owned(&a), owned(&b)));
        // A rebuild publishes a new file (new inode): loaded afresh, new bytes.
        let tmp = dir.join("data.tmp");
        std::fs::write(&tmp, vec![9u8; 8192]).unwrap();
        std::fs::rename(&tmp, &p).unwrap();
        let c = MappedEngine::open(std::slice::from_ref(&p), Mode::Memory).unwrap();
        assert!(!Arc::ptr_eq(owned(&a), owned(&c)));
        assert_eq!(owned(&c)[0], 9);
        let first = Arc::downgrade(owned(&a));
        drop((a, b, c));
        assert_eq!(first.strong_count(), 0, "the copy is freed with its last engine");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
