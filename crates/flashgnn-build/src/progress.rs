//! Progress and cancellation shared between the build threads and the caller
//! (the Python CLI polls [`Progress::snapshot`] to drive tqdm bars).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// One named task: `done` out of `total` units (`unit` e.g. "B", "edges").
#[derive(Debug, Clone, PartialEq)]
pub struct TaskState {
    pub name: String,
    pub unit: String,
    pub done: u64,
    pub total: u64,
    pub finished: bool,
}

#[derive(Debug, Default)]
pub struct Progress {
    cancel: AtomicBool,
    tasks: Mutex<Vec<TaskState>>,
    counters: Mutex<Vec<(usize, AtomicU64)>>,
}

/// Handle for updating one task cheaply from a hot loop.
pub struct Task<'a> {
    progress: &'a Progress,
    index: usize,
    local: u64,
    flushed: u64,
}

impl Progress {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::SeqCst);
    }
    pub fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
    pub fn check(&self) -> crate::Result<()> {
        if self.is_cancelled() {
            Err(crate::BuildError::Cancelled)
        } else {
            Ok(())
        }
    }

    pub fn task(&self, name: &str, unit: &str, total: u64) -> Task<'_> {
        let mut t = self.tasks.lock().unwrap();
        t.push(TaskState { name: name.into(), unit: unit.into(), done: 0, total, finished: false });
        let index = t.len() - 1;
        self.counters.lock().unwrap().push((index, AtomicU64::new(0)));
        Task { progress: self, index, local: 0, flushed: 0 }
    }

    pub fn snapshot(&self) -> Vec<TaskState> {
        let mut tasks = self.tasks.lock().unwrap().clone();
        for (i, c) in self.counters.lock().unwrap().iter() {
            tasks[*i].done = c.load(Ordering::Relaxed);
        }
        tasks
    }

    fn set(&self, index: usize, done: u64) {
        if let Some((_, c)) = self.counters.lock().unwrap().iter().find(|(i, _)| *i == index) {
            c.store(done, Ordering::Relaxed);
        }
    }
}

impl Task<'_> {
    /// Add `n` units; publishes at most every 64 Ki units to keep locks rare.
    pub fn add(&mut self, n: u64) {
        self.local += n;
        if self.local - self.flushed >= 1 << 16 {
            self.flushed = self.local;
            self.progress.set(self.index, self.local);
        }
    }
    pub fn set_total(&mut self, total: u64) {
        self.progress.tasks.lock().unwrap()[self.index].total = total;
    }
    pub fn finish(&mut self) {
        self.progress.set(self.index, self.local);
        self.progress.tasks.lock().unwrap()[self.index].finished = true;
    }
}

impl Drop for Task<'_> {
    fn drop(&mut self) {
        self.finish();
    }
}
