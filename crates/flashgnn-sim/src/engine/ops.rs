//! A read's op sequence outside the flash array: the queue-depth token and
//! the host stack (host designs), the NVMe command and the device's NVMe
//! queue, the firmware or router on the controller's cores, host- or
//! controller-side sampling, and the data's trip over PCIe. `Engine::new`
//! picks the sequence from the design; `Op::Flash` hands the read to the
//! flash side ([`super::flash`]) and the read comes back here when its last
//! page is done.
//!
//! A read runs its ops in order and holds at most one queue at a time but
//! its NVMe queue entry and its token; each queued op's wait and service
//! time go to the read's latency categories, which the batch's critical path
//! sums. State lives in the per-batch read table, so memory is one batch's.

use flashgnn_format::trace::KIND_SLOT_PAGE;

use super::{Engine, Op, CTRL, E_GRANT, E_OPDONE, HOST, NOPAGE, PCIE, PS, R_HOSTCPU, R_TOKEN, WAF};
use crate::design::{Firmware, Pcie, SampleAt};

impl<'a> Engine<'a> {
    pub(super) fn begin(&mut self, i: u32) {
        self.inflight_delta(true);
        if self.d.sample_at != SampleAt::Host {
            let nvq = self.r_nvq(self.dev_of(i));
            self.res[nvq].acquire(self.now, (i, NOPAGE));
            self.st[i as usize].t_dev = self.now;
        }
        self.run_ops(i);
    }

    /// Nodes sampled from read `i`'s bytes; the extra parts of a read split
    /// at a chunk boundary sample nothing (its first part carries them).
    pub(super) fn items(&self, i: u32) -> u64 {
        if i as usize >= self.n_orig {
            0
        } else {
            self.reads[i as usize].items.max(1) as u64
        }
    }

    /// Service time (ps) of a queued op for read `i`.
    fn service(&mut self, op: Op, i: u32) -> u64 {
        let r = self.reads[i as usize];
        let c = &self.cfg;
        match op {
            Op::Fw => {
                let ns = if self.d.firmware == Firmware::DirectGraph {
                    c.controller.firmware_ns_directgraph
                } else {
                    c.controller.firmware_ns_per_command
                };
                (ns * PS) as u64
            }
            Op::HostSample => {
                if r.kind == KIND_SLOT_PAGE || r.kind == 1 {
                    (c.host.cpu_ns_per_node * PS) as u64 * self.items(i)
                } else {
                    0
                }
            }
            Op::CoreSample => {
                if r.kind == KIND_SLOT_PAGE || r.kind == 1 {
                    (c.controller.sample_ns_per_node * PS) as u64 * self.items(i)
                } else {
                    0
                }
            }
            Op::PcieData => {
                let bytes = if self.d.pcie == Pcie::Extent { r.length } else { r.bytes_used.max(1) } as u64;
                self.bytes_pcie += bytes;
                self.bytes_host += bytes;
                (bytes as f64 * self.pcie_ps_per_byte) as u64
            }
            _ => 0,
        }
    }

    /// The queue an op of read `i` waits in (its device's, but the host CPU).
    fn res_of(&self, op: Op, i: u32) -> usize {
        match op {
            Op::Fw | Op::CoreSample => self.r_cores(self.dev_of(i)),
            Op::HostSample => R_HOSTCPU,
            Op::PcieData => self.r_pcie(self.dev_of(i)),
            _ => usize::MAX,
        }
    }

    fn cat_of(op: Op) -> (usize, usize) {
        // (service category, wait category)
        match op {
            Op::Fw | Op::CoreSample => (CTRL, CTRL),
            Op::HostSample => (HOST, HOST),
            Op::PcieData => (PCIE, WAF),
            _ => (HOST, HOST),
        }
    }

    /// Run read `i`'s ops from its current one until one has to wait.
    pub(super) fn run_ops(&mut self, i: u32) {
        loop {
            let k = self.st[i as usize].op as usize;
            if k == self.ops.len() {
                self.finish(i);
                return;
            }
            let op = self.ops[k];
            let now = self.now;
            match op {
                Op::TokenAcq => {
                    self.st[i as usize].t_token = now;
                    if !self.res[R_TOKEN].acquire(now, (i, NOPAGE)) {
                        return; // E_GRANT continues
                    }
                    self.st[i as usize].op += 1;
                }
                Op::TokenRel => {
                    let nvq = self.r_nvq(self.dev_of(i));
                    let arrived = self.st[i as usize].t_dev;
                    self.res[nvq].release(now, arrived);
                    let arrived = self.st[i as usize].t_token;
                    if let Some((w, p)) = self.res[R_TOKEN].release(now, arrived) {
                        self.push(now, E_GRANT, w, p);
                    }
                    self.st[i as usize].op += 1;
                }
                Op::HalfStack | Op::Nvme | Op::Router => {
                    let (t, cat) = match op {
                        Op::HalfStack => (self.half_stack, HOST),
                        Op::Nvme => (self.nvme, PCIE),
                        _ => ((self.cfg.controller.router_ns * PS) as u64, CTRL),
                    };
                    self.st[i as usize].cats[cat] += t;
                    if let Op::Nvme = op {
                        // The command is at its device until the data is home.
                        let nvq = self.r_nvq(self.dev_of(i));
                        self.res[nvq].acquire(now, (i, NOPAGE));
                        self.st[i as usize].t_dev = now;
                    }
                    self.push(now + t, E_OPDONE, i, NOPAGE);
                    return;
                }
                Op::Fw | Op::HostSample | Op::CoreSample | Op::PcieData => {
                    self.st[i as usize].t_mark = now;
                    let r = self.res_of(op, i);
                    if self.res[r].acquire(now, (i, NOPAGE)) {
                        self.granted_op(i, op);
                    }
                    return;
                }
                Op::Flash => {
                    self.start_flash(i);
                    return;
                }
            }
        }
    }

    fn granted_op(&mut self, i: u32, op: Op) {
        let now = self.now;
        let (sc, wc) = Self::cat_of(op);
        let s = self.service(op, i);
        let st = &mut self.st[i as usize];
        st.cats[wc] += now - st.t_mark;
        st.cats[sc] += s;
        match op {
            Op::Fw | Op::CoreSample => self.core_ps += s as u128,
            Op::HostSample => self.hostcpu_ps += s as u128,
            _ => {}
        }
        self.push(now + s, E_OPDONE, i, NOPAGE);
    }

    /// Read `i`'s current op has run its time: free its queue (the next
    /// waiter is granted) and go on with the next op.
    pub(super) fn op_done(&mut self, i: u32) {
        let op = self.ops[self.st[i as usize].op as usize];
        let r = self.res_of(op, i);
        if r != usize::MAX {
            let arrived = self.st[i as usize].t_mark;
            if let Some((w, p)) = self.res[r].release(self.now, arrived) {
                self.push(self.now, E_GRANT, w, p);
            }
        }
        self.st[i as usize].op += 1;
        self.run_ops(i);
    }

    /// Read `i` got the token or the server it waited for.
    pub(super) fn op_granted(&mut self, i: u32) {
        let op = self.ops[self.st[i as usize].op as usize];
        if let Op::TokenAcq = op {
            let st = &mut self.st[i as usize];
            st.cats[HOST] += self.now - st.t_token;
            st.op += 1;
            self.run_ops(i);
        } else {
            self.granted_op(i, op);
        }
    }

    fn finish(&mut self, i: u32) {
        let now = self.now;
        if self.d.sample_at != SampleAt::Host {
            let nvq = self.r_nvq(self.dev_of(i));
            let arrived = self.st[i as usize].t_dev;
            self.res[nvq].release(now, arrived);
        }
        let st = &mut self.st[i as usize];
        assert!(!st.done, "read {i} served twice");
        st.done = true;
        self.inflight_delta(false);
        // A read split at chunk boundaries is served when its last part is.
        let i = if (i as usize) < self.n_orig { i } else { self.parent[i as usize - self.n_orig] };
        self.parts_left[i as usize] -= 1;
        if self.parts_left[i as usize] > 0 {
            return;
        }
        let st = &mut self.st[i as usize];
        st.done_at = now;
        self.served += 1;
        self.left -= 1;
        let hop = st.hop as usize;
        self.hop_left[hop] -= 1;
        let kids = std::mem::take(&mut self.children[i as usize]);
        for c in kids {
            self.maybe_start(c, now);
        }
        if self.d.barrier {
            self.advance_gate();
        }
    }
}
