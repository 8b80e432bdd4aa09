//! The `pread` engines: synchronous O_DIRECT `pread` (threads = 0: one read
//! at a time, SmartSAGE's software baseline), or a pool of worker threads each
//! blocking in `pread` (the portable fallback when io_uring is unavailable).

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};

use crate::aligned::AlignedBuf;
use crate::engine::{eof_error, open_direct, Done, IoCounters, ReadEngine, ReadReq};
use crate::IoError;

type Job = (ReadReq, AlignedBuf);
type Outcome = Result<Done, IoError>;

fn read_full(
    file: &std::fs::File,
    path: &Path,
    req: ReadReq,
    buf: &mut AlignedBuf,
    max_read: u32,
) -> Result<(), IoError> {
    let len = req.len as usize;
    buf.set_len(len);
    let mut got = 0;
    while got < len {
        let end = len.min(got + max_read as usize);
        match file.read_at(&mut buf.spare()[got..end], req.offset + got as u64) {
            Ok(0) => return Err(eof_error(path, req.offset, req.len, got)),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted || e.raw_os_error() == Some(libc::EAGAIN) => continue,
            Err(e) => return Err(IoError::new("reading", path, Some(req.offset + got as u64), e)),
        }
    }
    Ok(())
}

pub struct PreadEngine {
    files: Arc<Vec<std::fs::File>>,
    paths: Arc<Vec<PathBuf>>,
    threads: usize,
    max_read: u32,
    tx: Option<Sender<Job>>,
    rx: Option<Receiver<Outcome>>,
    workers: Vec<std::thread::JoinHandle<()>>,
    ready: Vec<Done>,
    in_flight: usize,
    counters: IoCounters,
}

impl PreadEngine {
    pub fn open(paths: &[PathBuf], threads: usize, max_read: u32) -> Result<PreadEngine, IoError> {
        let mut files = Vec::new();
        for p in paths {
            files.push(open_direct(p)?.0);
        }
        let files = Arc::new(files);
        let paths = Arc::new(paths.to_vec());
        let mut e = PreadEngine {
            files,
            paths,
            threads,
            max_read,
            tx: None,
            rx: None,
            workers: Vec::new(),
            ready: Vec::new(),
            in_flight: 0,
            counters: IoCounters::default(),
        };
        if threads > 0 {
            let (tx, job_rx) = channel::<Job>();
            let (done_tx, rx) = channel::<Outcome>();
            let job_rx = Arc::new(Mutex::new(job_rx));
            for _ in 0..threads {
                let (job_rx, done_tx, files, paths) =
                    (job_rx.clone(), done_tx.clone(), e.files.clone(), e.paths.clone());
                e.workers.push(std::thread::spawn(move || loop {
                    let job = job_rx.lock().unwrap().recv();
                    let Ok((req, mut buf)) = job else { return };
                    let r = read_full(&files[req.file as usize], &paths[req.file as usize], req, &mut buf, max_read)
                        .map(|_| Done { req, buf });
                    if done_tx.send(r).is_err() {
                        return;
                    }
                }));
            }
            e.tx = Some(tx);
            e.rx = Some(rx);
        }
        Ok(e)
    }
}

impl ReadEngine for PreadEngine {
    fn name(&self) -> &'static str {
        if self.threads == 0 {
            "pread"
        } else {
            "pread-pool"
        }
    }
    fn depth(&self) -> usize {
        self.threads.max(1)
    }
    /// Includes synchronous reads finished but not yet reaped, so callers
    /// that fill up to `depth()` hold at most `depth()` buffers.
    fn in_flight(&self) -> usize {
        self.in_flight + self.ready.len()
    }
    fn submit(&mut self, req: ReadReq, mut buf: AlignedBuf) -> Result<(), IoError> {
        self.in_flight += 1;
        self.counters.record(req.len, self.in_flight);
        match &self.tx {
            None => {
                // Synchronous: the read happens now.
                let r = read_full(
                    &self.files[req.file as usize],
                    &self.paths[req.file as usize],
                    req,
                    &mut buf,
                    self.max_read,
                );
                self.in_flight -= 1;
                r?;
                self.ready.push(Done { req, buf });
                Ok(())
            }
            Some(tx) => tx.send((req, buf)).map_err(|_| {
                IoError::new(
                    "reading",
                    &self.paths[req.file as usize],
                    Some(req.offset),
                    std::io::Error::other("pread pool stopped"),
                )
            }),
        }
    }
    fn complete(&mut self, min: usize, out: &mut Vec<Done>) -> Result<(), IoError> {
        let mut n = self.ready.len();
        out.append(&mut self.ready);
        if let Some(rx) = &self.rx {
            while self.in_flight > 0 {
                let r = if n < min { rx.recv().ok() } else { rx.try_recv().ok() };
                let Some(r) = r else { break };
                self.in_flight -= 1;
                out.push(r?);
                n += 1;
            }
        }
        Ok(())
    }
    fn counters(&self) -> &IoCounters {
        &self.counters
    }
    fn path(&self, file: u16) -> &Path {
        &self.paths[file as usize]
    }
}

impl Drop for PreadEngine {
    fn drop(&mut self) {
        self.tx = None; // workers exit when the channel closes
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}
