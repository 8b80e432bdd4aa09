//! Designs: named policies over the same trace saying what runs where and
//! what crosses which link (docs/simulator.md, "Designs").

use serde::Serialize;

/// Where neighbor lists are sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SampleAt {
    Host,
    Controller,
    Die,
}

/// How a flash command reaches the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Firmware {
    /// FTL translation and scheduling on an embedded core per command.
    PerCommand,
    /// DirectGraph: physical addresses in the graph, a lighter command.
    DirectGraph,
    /// BG-2: channel-level routing in hardware, no core on the path.
    Router,
}

/// What crosses PCIe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Pcie {
    /// Every read's whole extent (block interface).
    Extent,
    /// Only the bytes used (sampled ids and feature rows).
    Used,
    /// Only the GNN output per target (computation in storage).
    Output,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Design {
    pub name: &'static str,
    pub sample_at: SampleAt,
    /// Hop-by-hop barrier (true) or out of order: a read issues as soon as
    /// the read it depends on completes.
    pub barrier: bool,
    pub firmware: Firmware,
    /// Channels carry only the bytes used (die-level sampler) instead of
    /// whole pages.
    pub channel_used_only: bool,
    pub pcie: Pcie,
    /// The GNN step runs on the in-storage accelerator.
    pub compute_in_ssd: bool,
    /// BeaconGNN's CPU-centric baseline: reads go through the kernel block
    /// layer, `host.block_queue_depth` commands in flight (not the engine's
    /// depth).
    pub block_interface: bool,
    /// The GNN step runs on a discrete accelerator behind PCIe (BeaconGNN's
    /// CC and SmartSAGE platforms): the gathered subgraph (every read's used
    /// bytes) crosses PCIe host to accelerator before it.
    pub accel_over_pcie: bool,
    /// The host is in the loop between hops (BG-1, BG-SP, SmartSAGE): after
    /// the last read of a hop, the SSD returns the sampled ids and the host
    /// translates them and commands the next hop (a host stack plus an NVMe
    /// command per hop boundary; BeaconGNN section III, "Challenge 1").
    pub hop_round_trip: bool,
}

impl Design {
    /// Designs that stage whole flash pages in SSD DRAM and sample them there
    /// with the controller's cores: a page already in SSD DRAM needs no flash
    /// read (the SSD-DRAM page cache, docs/simulator.md).
    pub fn uses_dram_cache(&self) -> bool {
        self.sample_at == SampleAt::Controller && !self.channel_used_only
    }
}

pub const DESIGNS: &[Design] = &[
    Design {
        name: "cc",
        sample_at: SampleAt::Host,
        barrier: true,
        firmware: Firmware::PerCommand,
        channel_used_only: false,
        pcie: Pcie::Extent,
        compute_in_ssd: false,
        block_interface: true,
        accel_over_pcie: true,
        hop_round_trip: false,
    },
    Design {
        name: "host",
        sample_at: SampleAt::Host,
        barrier: false,
        firmware: Firmware::PerCommand,
        channel_used_only: false,
        pcie: Pcie::Extent,
        compute_in_ssd: false,
        block_interface: false,
        accel_over_pcie: false,
        hop_round_trip: false,
    },
    Design {
        name: "host-barrier",
        sample_at: SampleAt::Host,
        barrier: true,
        firmware: Firmware::PerCommand,
        channel_used_only: false,
        pcie: Pcie::Extent,
        compute_in_ssd: false,
        block_interface: false,
        accel_over_pcie: false,
        hop_round_trip: false,
    },
    Design {
        name: "smartsage",
        sample_at: SampleAt::Controller,
        barrier: true,
        firmware: Firmware::PerCommand,
        channel_used_only: false,
        pcie: Pcie::Used,
        compute_in_ssd: false,
        block_interface: false,
        accel_over_pcie: true,
        hop_round_trip: true,
    },
    Design {
        name: "bg-1",
        sample_at: SampleAt::Controller,
        barrier: true,
        firmware: Firmware::PerCommand,
        channel_used_only: false,
        pcie: Pcie::Output,
        compute_in_ssd: true,
        block_interface: false,
        accel_over_pcie: false,
        hop_round_trip: true,
    },
    Design {
        name: "bg-dg",
        sample_at: SampleAt::Controller,
        barrier: false,
        firmware: Firmware::DirectGraph,
        channel_used_only: false,
        pcie: Pcie::Output,
        compute_in_ssd: true,
        block_interface: false,
        accel_over_pcie: false,
        hop_round_trip: false,
    },
    Design {
        name: "bg-sp",
        sample_at: SampleAt::Die,
        barrier: true,
        firmware: Firmware::PerCommand,
        channel_used_only: true,
        pcie: Pcie::Output,
        compute_in_ssd: true,
        block_interface: false,
        accel_over_pcie: false,
        hop_round_trip: true,
    },
    Design {
        name: "bg-dgsp",
        sample_at: SampleAt::Die,
        barrier: false,
        firmware: Firmware::DirectGraph,
        channel_used_only: true,
        pcie: Pcie::Output,
        compute_in_ssd: true,
        block_interface: false,
        accel_over_pcie: false,
        hop_round_trip: false,
    },
    Design {
        name: "bg-2",
        sample_at: SampleAt::Die,
        barrier: false,
        firmware: Firmware::Router,
        channel_used_only: true,
        pcie: Pcie::Output,
        compute_in_ssd: true,
        block_interface: false,
        accel_over_pcie: false,
        hop_round_trip: false,
    },
];

pub fn by_name(name: &str) -> Option<&'static Design> {
    DESIGNS.iter().find(|d| d.name == name)
}

pub fn names() -> String {
    DESIGNS.iter().map(|d| d.name).collect::<Vec<_>>().join(", ")
}
