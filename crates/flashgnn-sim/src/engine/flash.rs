//! A read's pages in the flash array: the logical pages it spans, their
//! die and channel (the address mapping is `Engine::map`), the SSD-DRAM
//! page cache, and each page's trip die (tR) → channel → SSD DRAM. A die
//! stays held until its page register has crossed the channel; with
//! multi-plane reads up to `planes` pages queued for one die share its tR
//! and the die is held until every one of them has crossed.
//!
//! Page phases, in order: 0 waiting for the die, 1 in tR then waiting for
//! the channel, 2 on the channel, 3 waiting for or in SSD DRAM, 4 read out.
//! A page's state lives in the per-batch page table; the page cache is the
//! only flash-side state kept across batches, bounded by its capacity.

use flashgnn_format::trace::KIND_SLOT_PAGE;

use super::{Engine, PageState, CTRL, E_DRAM, E_GRANT, E_TR, E_XFER, FLASH, PS, WAF, WBF};
use crate::design::SampleAt;

impl<'a> Engine<'a> {
    pub(super) fn start_flash(&mut self, i: u32) {
        let r = self.reads[i as usize];
        let p = self.cfg.flash.page_bytes as u64;
        let dev = self.dev_of(i);
        self.dev_reads[dev] += 1;
        // Logical pages of the device's own part file (one device: the file).
        let base = ((r.file as u64) << 40) + self.local_offset(r.offset);
        let first = base / p;
        let last = (base + r.length as u64 - 1) / p;
        let np = (last - first + 1) as u32;
        let used_per_page = (r.bytes_used as u64).div_ceil(np as u64).max(1) as u32;
        let page0 = self.pages.len() as u32;
        for lpn in first..=last {
            let (ch, die) = self.map(lpn);
            let (ch, die) = (dev as u32 * self.n_ch + ch, dev as u32 * self.n_die + die);
            let bytes = if self.d.channel_used_only {
                used_per_page
            } else {
                // Whole flash pages cross the channel (ECC codewords), but
                // never more than the read needs beyond one page.
                p as u32
            };
            let hit = match self.cache.get_mut(dev) {
                Some(c) => c.hit(lpn),
                None => false,
            };
            if !self.cache.is_empty() {
                if hit {
                    self.cache_hits += 1;
                } else {
                    self.cache_misses += 1;
                }
            }
            let ch_bytes = if self.d.channel_used_only { bytes } else { bytes + self.cfg.flash.spare_bytes };
            self.pages.push(PageState { die, ch, bytes, ch_bytes, lpn, hit, ..Default::default() });
        }
        let st = &mut self.st[i as usize];
        st.page0 = page0;
        st.pages_left = np;
        for k in 0..np {
            let pg = page0 + k;
            let now = self.now;
            let ps = &mut self.pages[pg as usize];
            if ps.hit {
                // Already in SSD DRAM: read out once, no flash, no channel.
                ps.t_dram = now;
                ps.phase = 3;
                let r = self.r_dram(dev);
                if self.res[r].acquire(now, (i, pg)) {
                    self.dram_granted(i, pg);
                }
                continue;
            }
            ps.t_die = now;
            let die = ps.die;
            let die = self.r_die(die);
            if self.res[die].acquire(now, (i, pg)) {
                self.die_granted(i, pg);
            }
        }
    }

    fn die_granted(&mut self, i: u32, pg: u32) {
        self.start_tr(i, pg);
        if self.multi_plane {
            // Up to `planes` pages queued for this die share the tR (the
            // same-page-offset rule of real multi-plane reads is not
            // modelled); the die is held until every one of them has left
            // its page register over the channel.
            let d = self.pages[pg as usize].die as usize;
            let mut group = std::mem::take(&mut self.die_group[d]);
            group.clear();
            group.push(pg);
            let rd = self.r_die(d as u32);
            while group.len() < self.cfg.flash.planes as usize {
                match self.res[rd].ride() {
                    Some((w, p)) => {
                        group.push(p);
                        self.start_tr(w, p);
                    }
                    None => break,
                }
            }
            self.group_left[d] = group.len() as u32;
            self.die_group[d] = group;
        }
    }

    /// Page `pg` of read `i` starts its array read (tR + command, and the
    /// die-level sampler's time) now.
    fn start_tr(&mut self, i: u32, pg: u32) {
        let now = self.now;
        let mut t = ((self.cfg.flash.read_ns + self.cfg.flash.command_ns) * PS) as u64;
        self.tr_ps += (self.cfg.flash.read_ns * PS) as u128;
        if self.d.sample_at == SampleAt::Die {
            let r = self.reads[i as usize];
            if r.kind == KIND_SLOT_PAGE || r.kind == 1 {
                let s = (self.cfg.flash.sampler_ns_per_node * PS) as u64 * self.items(i);
                t += s;
                self.sampler_ps += s as u128;
            }
        }
        self.flash_cmds += 1;
        self.dev_cmds[(self.pages[pg as usize].die / self.n_die) as usize] += 1;
        let ps = &mut self.pages[pg as usize];
        ps.cats[WBF] += now - ps.t_die;
        ps.cats[FLASH] += t;
        ps.phase = 1;
        self.push(now + t, E_TR, i, pg);
    }

    fn ch_granted(&mut self, i: u32, pg: u32) {
        let now = self.now;
        let ps = &mut self.pages[pg as usize];
        let t = (ps.ch_bytes as f64 * self.ch_ps_per_byte) as u64;
        ps.cats[WAF] += now - ps.t_ch;
        ps.cats[FLASH] += t;
        ps.phase = 2;
        self.bytes_channel += ps.ch_bytes as u64;
        self.xfer_ps += t as u128;
        self.push(now + t, E_XFER, i, pg);
    }

    fn dram_granted(&mut self, i: u32, pg: u32) {
        let now = self.now;
        let ps = &mut self.pages[pg as usize];
        // Written into SSD DRAM by the channel, read out once by a core or
        // the DMA; a cache hit is only read out.
        let bytes = if ps.hit { ps.bytes as u64 } else { 2 * ps.bytes as u64 };
        let t = (bytes as f64 * self.dram_ps_per_byte) as u64;
        ps.cats[CTRL] += now - ps.t_dram + t;
        ps.phase = 4;
        self.bytes_dram += bytes;
        self.push(now + t, E_DRAM, i, pg);
    }

    fn page_done(&mut self, i: u32, pg: u32) {
        let cats = self.pages[pg as usize].cats;
        let st = &mut self.st[i as usize];
        st.pcats = cats; // the last page to finish is on the critical path
        st.pages_left -= 1;
        if st.pages_left == 0 {
            st.op += 1;
            self.run_ops(i);
        }
    }

    /// Page `pg` of read `i` got the die, the channel or SSD DRAM, by its
    /// phase.
    pub(super) fn page_granted(&mut self, i: u32, pg: u32) {
        match self.pages[pg as usize].phase {
            0 => self.die_granted(i, pg),
            1 => self.ch_granted(i, pg),
            _ => self.dram_granted(i, pg),
        }
    }

    /// Page `pg`'s tR is over: its page register waits for the channel.
    pub(super) fn tr_done(&mut self, i: u32, pg: u32) {
        let now = self.now;
        let ch = self.r_ch(self.pages[pg as usize].ch);
        let ps = &mut self.pages[pg as usize];
        ps.t_ch = now;
        if self.res[ch].acquire(now, (i, pg)) {
            self.ch_granted(i, pg);
        }
    }

    /// Page `pg` has crossed the channel: free the channel and (when the
    /// last page of its multi-plane group is out) the die, then stage the
    /// page in SSD DRAM unless the design uses only the needed bytes.
    pub(super) fn xfer_done(&mut self, i: u32, pg: u32) {
        let now = self.now;
        let (ch, die, t_ch, t_die) = {
            let ps = &self.pages[pg as usize];
            (self.r_ch(ps.ch), self.r_die(ps.die), ps.t_ch, ps.t_die)
        };
        if let Some((w, p)) = self.res[ch].release(now, t_ch) {
            self.push(now, E_GRANT, w, p);
        }
        if self.multi_plane {
            let d = self.pages[pg as usize].die as usize;
            self.group_left[d] -= 1;
            if self.group_left[d] == 0 {
                let group = std::mem::take(&mut self.die_group[d]);
                for &m in &group[1..] {
                    let t = self.pages[m as usize].t_die;
                    self.res[die].leave(now, t);
                }
                let t0 = self.pages[group[0] as usize].t_die;
                self.die_group[d] = group;
                if let Some((w, p)) = self.res[die].release(now, t0) {
                    self.push(now, E_GRANT, w, p);
                }
            }
        } else if let Some((w, p)) = self.res[die].release(now, t_die) {
            self.push(now, E_GRANT, w, p);
        }
        if !self.d.channel_used_only {
            let r = self.r_dram(self.dev_of(i));
            let ps = &mut self.pages[pg as usize];
            ps.t_dram = now;
            ps.phase = 3;
            if self.res[r].acquire(now, (i, pg)) {
                self.dram_granted(i, pg);
            }
        } else {
            self.page_done(i, pg);
        }
    }

    /// Page `pg` is read out of SSD DRAM: free it, cache the page.
    pub(super) fn dram_done(&mut self, i: u32, pg: u32) {
        let now = self.now;
        let (t, lpn, hit) = {
            let ps = &self.pages[pg as usize];
            (ps.t_dram, ps.lpn, ps.hit)
        };
        let dev = self.dev_of(i);
        let r = self.r_dram(dev);
        if let Some((w, p)) = self.res[r].release(now, t) {
            self.push(now, E_GRANT, w, p);
        }
        if !hit {
            if let Some(c) = self.cache.get_mut(dev) {
                c.insert(lpn);
            }
        }
        self.page_done(i, pg);
    }
}
