//! The lookahead's row tier: feature rows kept under Belady's optimal
//! replacement within a window of known batches (Ginex's superbatch
//! Belady). When a batch is served, the next batches' node ids are known, so
//! after each batch the tier keeps the `capacity` rows whose next use is
//! soonest: rows the window needs are protected by construction (GIDS'
//! window buffering), rows it never needs go first. Batch-granular: within
//! one batch every row is used once, so the order inside a batch cannot
//! change what is optimal.
//!
//! Invariants: its bytes are the budget's `lookahead_cache` share
//! ([`crate::budget`]), which is only what the page cache cannot hold, so a
//! row is never held by both; `capacity` is fixed at creation
//! (`(budget - 8 N) / (row bytes + 8)`: the two node-sized arrays,
//! [`BELADY_NODE_BYTES`] per node, are paid from the budget); every id is
//! bounds-checked against the node arrays, which grow (by doubling) only for
//! ids a mutated dataset added past its base.

use crate::budget::BELADY_NODE_BYTES;

/// "Not needed inside the window".
const NEVER: i32 = i32::MAX;

pub struct BeladyRows {
    row_bytes: usize,
    capacity: usize,
    /// `capacity` rows of `row_bytes`, slot-indexed.
    rows: Vec<u8>,
    /// Node id -> slot (-1: not held).
    slot_of: Vec<i32>,
    /// Slot -> node id (-1: free).
    id_of: Vec<i64>,
    /// Node id -> the first batch of the window that uses it (scratch, NEVER between updates).
    mark: Vec<i32>,
    pub hits: u64,
    pub misses: u64,
}

impl BeladyRows {
    /// Rows a budget holds: what is left after the node arrays, per row and its slot's id.
    pub fn capacity_for(budget: u64, row_bytes: usize, num_nodes: u64) -> usize {
        let left = budget.saturating_sub(BELADY_NODE_BYTES * num_nodes);
        (left / (row_bytes.max(1) as u64 + 8)) as usize
    }

    /// A tier of `budget` bytes for rows of `row_bytes` over `num_nodes` nodes.
    pub fn new(budget: u64, row_bytes: usize, num_nodes: u64) -> BeladyRows {
        let capacity = Self::capacity_for(budget, row_bytes, num_nodes);
        BeladyRows {
            row_bytes,
            capacity,
            rows: vec![0; capacity * row_bytes],
            slot_of: vec![-1; num_nodes as usize],
            id_of: vec![-1; capacity],
            mark: vec![NEVER; num_nodes as usize],
            hits: 0,
            misses: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Node id -> slot of every node (-1: not held).
    pub fn slot_of(&self) -> &[i32] {
        &self.slot_of
    }

    /// Grow the node arrays to cover every id given (a mutated dataset's
    /// vertices added past its base); ids must be >= 0.
    fn cover<'a>(&mut self, ids: impl IntoIterator<Item = &'a i64>) {
        let top = ids.into_iter().copied().max().unwrap_or(-1);
        if top < self.slot_of.len() as i64 {
            return;
        }
        let n = (top as usize + 1).max(2 * self.slot_of.len());
        self.slot_of.resize(n, -1);
        self.mark.resize(n, NEVER);
    }

    fn check(ids: &[i64], what: &str) -> Result<(), String> {
        match ids.iter().find(|&&v| v < 0) {
            Some(v) => Err(format!("{what}: node id {v} < 0")),
            None => Ok(()),
        }
    }

    /// Copy the held rows of `ids[p]` for each position `p` of `need` into
    /// row `p` of `x` (`ids.len()` rows of `row_bytes`); return the
    /// positions still needed, in order. Counts hits and misses.
    pub fn fill(&mut self, ids: &[i64], need: &[i64], x: &mut [u8]) -> Result<Vec<i64>, String> {
        Self::check(ids, "lookahead rows")?;
        let rb = self.row_bytes;
        if x.len() != ids.len() * rb {
            return Err(format!("lookahead rows: x has {} bytes for {} rows of {rb}", x.len(), ids.len()));
        }
        self.cover(ids);
        let mut left = Vec::new();
        for &p in need {
            let id = *usize::try_from(p)
                .ok()
                .and_then(|p| ids.get(p))
                .ok_or_else(|| format!("lookahead rows: position {p} out of range [0, {})", ids.len()))?
                as usize;
            match self.slot_of[id] {
                s if s >= 0 => {
                    let (s, p) = (s as usize, p as usize);
                    x[p * rb..(p + 1) * rb].copy_from_slice(&self.rows[s * rb..(s + 1) * rb]);
                    self.hits += 1;
                }
                _ => {
                    left.push(p);
                    self.misses += 1;
                }
            }
        }
        Ok(left)
    }

    /// After serving a batch (`ids`, rows `x`), keep the rows whose next use
    /// within `window` (the following batches' ids, in order) is soonest.
    pub fn update(&mut self, ids: &[i64], x: &[u8], window: &[&[i64]]) -> Result<(), String> {
        if self.capacity == 0 {
            return Ok(());
        }
        Self::check(ids, "lookahead rows")?;
        for w in window {
            Self::check(w, "lookahead window")?;
        }
        let rb = self.row_bytes;
        if x.len() != ids.len() * rb {
            return Err(format!("lookahead rows: x has {} bytes for {} rows of {rb}", x.len(), ids.len()));
        }
        self.cover(ids.iter().chain(window.iter().flat_map(|w| w.iter())));
        // Candidates: the rows held, then this batch's rows not held (by position).
        let occupied: Vec<usize> = (0..self.capacity).filter(|&s| self.id_of[s] >= 0).collect();
        let new_pos: Vec<usize> = (0..ids.len()).filter(|&p| self.slot_of[ids[p] as usize] < 0).collect();
        // Earlier batches overwrite later ones: the first use wins.
        for (j, w) in window.iter().enumerate().rev() {
            for &v in w.iter() {
                self.mark[v as usize] = j as i32;
            }
        }
        let far = window.len() as i32;
        let next = |v: i64| self.mark[v as usize].min(far);
        let mut cand: Vec<(i32, usize)> = occupied.iter().map(|&s| (next(self.id_of[s]), s)).collect();
        let held = cand.len();
        cand.extend(new_pos.iter().map(|&p| (next(ids[p]), usize::MAX - p)));
        for w in window {
            for &v in w.iter() {
                self.mark[v as usize] = NEVER;
            }
        }
        let mut keep = vec![true; cand.len()];
        if cand.len() > self.capacity {
            let mut order: Vec<usize> = (0..cand.len()).collect();
            order.select_nth_unstable_by_key(self.capacity - 1, |&i| cand[i].0);
            keep.iter_mut().for_each(|k| *k = false);
            for &i in &order[..self.capacity] {
                keep[i] = true;
            }
        }
        for (i, &(_, s)) in cand[..held].iter().enumerate() {
            if !keep[i] {
                self.slot_of[self.id_of[s] as usize] = -1;
                self.id_of[s] = -1;
            }
        }
        let free: Vec<usize> = (0..self.capacity).filter(|&s| self.id_of[s] < 0).collect();
        let mut free = free.into_iter();
        for (i, &(_, tag)) in cand[held..].iter().enumerate() {
            if !keep[held + i] {
                continue;
            }
            let (p, s) = (usize::MAX - tag, free.next().expect("a kept row has a free slot"));
            self.rows[s * rb..(s + 1) * rb].copy_from_slice(&x[p * rb..(p + 1) * rb]);
            self.id_of[s] = ids[p];
            self.slot_of[ids[p] as usize] = s as i32;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(v: i64) -> Vec<u8> {
        vec![v as u8; 4]
    }

    #[test]
    fn keeps_the_rows_needed_soonest_and_serves_them() {
        // Room for 2 rows of 4 bytes over 10 nodes.
        let mut c = BeladyRows::new(8 * 10 + 2 * 12, 4, 10);
        assert_eq!(c.capacity(), 2);
        let ids = [1i64, 2, 3];
        let x: Vec<u8> = ids.iter().flat_map(|&v| row(v)).collect();
        // Node 3 is needed next, node 1 after it, node 2 never.
        c.update(&ids, &x, &[&[3, 7], &[1]]).unwrap();
        assert_eq!((c.slot_of()[3] >= 0, c.slot_of()[1] >= 0, c.slot_of()[2]), (true, true, -1));
        let mut out = vec![0u8; 12];
        let left = c.fill(&[3, 1, 2], &[0, 1, 2], &mut out).unwrap();
        assert_eq!(left, vec![2]);
        assert_eq!((&out[..4], &out[4..8]), (&row(3)[..], &row(1)[..]));
        assert_eq!((c.hits, c.misses), (2, 1));
        // Ids past the base (a mutated dataset) grow the node arrays.
        c.update(&[12], &row(12), &[&[12]]).unwrap();
        assert!(c.slot_of()[12] >= 0);
        assert!(c.fill(&[-1], &[0], &mut [0u8; 4]).unwrap_err().contains("node id -1"));
        assert!(c.fill(&[1], &[5], &mut [0u8; 4]).unwrap_err().contains("position 5"));
    }

    #[test]
    fn a_budget_below_the_node_arrays_holds_nothing() {
        assert_eq!(BeladyRows::capacity_for(8 * 100, 16, 100), 0);
        assert_eq!(BeladyRows::capacity_for(8 * 100 + 10 * 24, 16, 100), 10);
    }
}
