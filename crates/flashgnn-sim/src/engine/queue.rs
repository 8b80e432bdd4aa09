//! The queueing primitives of the model: [`Res`], a FIFO queue in front of
//! identical servers that integrates its own occupancy, busy servers and
//! sojourn times, and [`Lru`], the SSD-DRAM page cache.
//!
//! Both are deterministic (FIFO order; the LRU orders pages by an access
//! stamp, never by hash order) and bounded: a queue holds at most the reads
//! of one batch, the cache at most its capacity in pages.

use std::collections::{BTreeMap, HashMap, VecDeque};

#[derive(Debug, Clone, Default)]
pub(super) struct Res {
    servers: u32,
    pub(super) busy: u32,
    queue: VecDeque<(u32, u32)>,
    occ: u64,
    last: u64,
    pub(super) area: u128,
    pub(super) busy_area: u128,
    pub(super) arrivals: u64,
    pub(super) sojourn: u128,
}

impl Res {
    pub(super) fn new(servers: u32) -> Res {
        Res { servers, ..Default::default() }
    }
    pub(super) fn tick(&mut self, now: u64) {
        let dt = (now - self.last) as u128;
        self.area += dt * self.occ as u128;
        self.busy_area += dt * self.busy as u128;
        self.last = now;
    }
    /// Arrive; true when a server is free now.
    pub(super) fn acquire(&mut self, now: u64, who: (u32, u32)) -> bool {
        self.tick(now);
        self.occ += 1;
        self.arrivals += 1;
        if self.busy < self.servers {
            self.busy += 1;
            true
        } else {
            self.queue.push_back(who);
            false
        }
    }
    /// Take the first waiter into the service already under way (a
    /// multi-plane read joining the die's current tR): no server changes
    /// hands, the waiter stays counted as present until it [`Res::leave`]s.
    pub(super) fn ride(&mut self) -> Option<(u32, u32)> {
        self.queue.pop_front()
    }
    /// A rider leaves (arrived at `arrived`); the server stays with the
    /// waiter that holds it.
    pub(super) fn leave(&mut self, now: u64, arrived: u64) {
        self.tick(now);
        self.occ -= 1;
        self.sojourn += (now - arrived) as u128;
    }
    /// Leave (arrived at `arrived`); returns the waiter now granted.
    pub(super) fn release(&mut self, now: u64, arrived: u64) -> Option<(u32, u32)> {
        self.tick(now);
        self.occ -= 1;
        self.sojourn += (now - arrived) as u128;
        match self.queue.pop_front() {
            Some(w) => Some(w),
            None => {
                self.busy -= 1;
                None
            }
        }
    }
}

/// The SSD-DRAM page cache: least recently used logical pages, at most
/// `cap` of them. A page enters when its flash read has reached SSD DRAM, so
/// two reads of one page in flight at once both go to flash.
pub(super) struct Lru {
    cap: u64,
    stamp: u64,
    at: HashMap<u64, u64>,
    order: BTreeMap<u64, u64>,
}

impl Lru {
    pub(super) fn new(cap: u64) -> Lru {
        Lru { cap, stamp: 0, at: HashMap::new(), order: BTreeMap::new() }
    }
    /// True (and the page becomes the most recent) when `lpn` is cached.
    pub(super) fn hit(&mut self, lpn: u64) -> bool {
        match self.at.get_mut(&lpn) {
            Some(s) => {
                self.order.remove(s);
                self.stamp += 1;
                *s = self.stamp;
                self.order.insert(self.stamp, lpn);
                true
            }
            None => false,
        }
    }
    pub(super) fn insert(&mut self, lpn: u64) {
        if self.cap == 0 || self.hit(lpn) {
            return;
        }
        if self.at.len() as u64 >= self.cap {
            if let Some((_, old)) = self.order.pop_first() {
                self.at.remove(&old);
            }
        }
        self.stamp += 1;
        self.at.insert(lpn, self.stamp);
        self.order.insert(self.stamp, lpn);
    }
}
