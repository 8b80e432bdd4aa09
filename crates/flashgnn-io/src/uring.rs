//! The `uring` engine: io_uring + O_DIRECT, up to `depth` reads in flight,
//! submissions batched into one `io_uring_enter` per [`ReadEngine::complete`].

use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use io_uring::{opcode, types, IoUring};

use crate::aligned::AlignedBuf;
use crate::engine::{eof_error, open_direct, Done, IoCounters, ReadEngine, ReadReq};
use crate::IoError;

struct Pending {
    req: ReadReq,
    buf: AlignedBuf,
    /// Bytes already read (short reads are continued from here).
    got: usize,
}

pub struct UringEngine {
    ring: IoUring,
    files: Vec<std::fs::File>,
    paths: Vec<PathBuf>,
    slots: Vec<Option<Pending>>,
    free: Vec<usize>,
    in_flight: usize,
    depth: usize,
    /// Largest single read handed to the kernel (test knob; u32::MAX normally).
    max_read: u32,
    counters: IoCounters,
}

impl UringEngine {
    pub fn open(paths: &[PathBuf], depth: usize, max_read: u32) -> Result<UringEngine, IoError> {
        let depth = depth.clamp(1, 32768);
        let ring = IoUring::new(depth.next_power_of_two() as u32).map_err(|e| {
            IoError::new("io_uring_setup", paths.first().map(|p| p.as_path()).unwrap_or(Path::new("")), None, e)
        })?;
        let mut files = Vec::new();
        for p in paths {
            files.push(open_direct(p)?.0);
        }
        Ok(UringEngine {
            ring,
            files,
            paths: paths.to_vec(),
            slots: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            depth,
            max_read,
            counters: IoCounters::default(),
        })
    }

    fn push(&mut self, slot: usize) -> Result<(), IoError> {
        let p = self.slots[slot].as_mut().expect("pending slot");
        let fd = self.files[p.req.file as usize].as_raw_fd();
        // SAFETY (pointer): the buffer lives in `self.slots[slot]` until its
        // completion is reaped, and is not touched meanwhile.
        let ptr = unsafe { p.buf.as_mut_ptr().add(p.got) };
        let len = (p.req.len - p.got as u32).min(self.max_read);
        let sqe = opcode::Read::new(types::Fd(fd), ptr, len)
            .offset(p.req.offset + p.got as u64)
            .build()
            .user_data(slot as u64);
        loop {
            // SAFETY: the SQE references memory that outlives the operation (above).
            if unsafe { self.ring.submission().push(&sqe) }.is_ok() {
                return Ok(());
            }
            // Submission queue full: hand what we have to the kernel.
            self.ring.submit().map_err(|e| IoError::new("io_uring_enter", &self.paths[0], None, e))?;
        }
    }
}

impl ReadEngine for UringEngine {
    fn name(&self) -> &'static str {
        "uring"
    }
    fn depth(&self) -> usize {
        self.depth
    }
    fn in_flight(&self) -> usize {
        self.in_flight
    }
    fn submit(&mut self, req: ReadReq, mut buf: AlignedBuf) -> Result<(), IoError> {
        debug_assert!(req.offset % 512 == 0 && req.len % 512 == 0, "unaligned request {req:?}");
        buf.set_len(req.len as usize);
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        self.slots[slot] = Some(Pending { req, buf, got: 0 });
        self.in_flight += 1;
        self.counters.record(req.len, self.in_flight);
        self.push(slot)
    }

    fn complete(&mut self, min: usize, out: &mut Vec<Done>) -> Result<(), IoError> {
        let mut reaped = 0;
        let want = min.min(self.in_flight);
        loop {
            let wait = if reaped >= want { 0 } else { 1 };
            match self.ring.submit_and_wait(wait) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(IoError::new("io_uring_enter", &self.paths[0], None, e)),
            }
            let cqes: Vec<(u64, i32)> = self.ring.completion().map(|c| (c.user_data(), c.result())).collect();
            for (ud, res) in cqes {
                let slot = ud as usize;
                if res == -libc::EINTR || res == -libc::EAGAIN {
                    self.push(slot)?; // transient: resubmit as is
                    continue;
                }
                let p = self.slots[slot].as_mut().expect("completion for a pending slot");
                if res < 0 {
                    let (req, got) = (p.req, p.got);
                    self.slots[slot] = None;
                    self.free.push(slot);
                    self.in_flight -= 1;
                    return Err(IoError::new(
                        "reading",
                        &self.paths[req.file as usize],
                        Some(req.offset + got as u64),
                        std::io::Error::from_raw_os_error(-res),
                    ));
                }
                if res == 0 {
                    let (req, got) = (p.req, p.got);
                    self.slots[slot] = None;
                    self.free.push(slot);
                    self.in_flight -= 1;
                    return Err(eof_error(&self.paths[req.file as usize], req.offset, req.len, got));
                }
                p.got += res as usize;
                if p.got < p.req.len as usize {
                    self.push(slot)?; // short read: continue where it stopped
                    continue;
                }
                let p = self.slots[slot].take().expect("pending");
                self.free.push(slot);
                self.in_flight -= 1;
                out.push(Done { req: p.req, buf: p.buf });
                reaped += 1;
            }
            if reaped >= want {
                return Ok(());
            }
        }
    }
    fn counters(&self) -> &IoCounters {
        &self.counters
    }
    fn path(&self, file: u16) -> &Path {
        &self.paths[file as usize]
    }
}
