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
}

pub const DESIGNS: &[Design] = &[
    Design {
        name: "host",
        sample_at: SampleAt::Host,
        barrier: false,
        firmware: Firmware::PerCommand,
        channel_used_only: false,
        pcie: Pcie::Extent,
        compute_in_ssd: false,
    },
    Design {
        name: "host-barrier",
        sample_at: SampleAt::Host,
        barrier: true,
        firmware: Firmware::PerCommand,
        channel_used_only: false,
        pcie: Pcie::Extent,
        compute_in_ssd: false,
    },
    Design {
        name: "smartsage",
        sample_at: SampleAt::Controller,
        barrier: true,
        firmware: Firmware::PerCommand,
        channel_used_only: false,
        pcie: Pcie::Used,
        compute_in_ssd: false,
    },
    Design {
        name: "bg-1",
        sample_at: SampleAt::Controller,
        barrier: true,
        firmware: Firmware::PerCommand,
        channel_used_only: false,
        pcie: Pcie::Output,
        compute_in_ssd: true,
    },
    Design {
        name: "bg-dg",
        sample_at: SampleAt::Controller,
        barrier: false,
        firmware: Firmware::DirectGraph,
        channel_used_only: false,
        pcie: Pcie::Output,
        compute_in_ssd: true,
    },
    Design {
        name: "bg-sp",
        sample_at: SampleAt::Die,
        barrier: true,
        firmware: Firmware::PerCommand,
        channel_used_only: true,
        pcie: Pcie::Output,
        compute_in_ssd: true,
    },
    Design {
        name: "bg-dgsp",
        sample_at: SampleAt::Die,
        barrier: false,
        firmware: Firmware::DirectGraph,
        channel_used_only: true,
        pcie: Pcie::Output,
        compute_in_ssd: true,
    },
    Design {
        name: "bg-2",
        sample_at: SampleAt::Die,
        barrier: false,
        firmware: Firmware::Router,
        channel_used_only: true,
        pcie: Pcie::Output,
        compute_in_ssd: true,
    },
];

pub fn by_name(name: &str) -> Option<&'static Design> {
    DESIGNS.iter().find(|d| d.name == name)
}

pub fn names() -> String {
    DESIGNS.iter().map(|d| d.name).collect::<Vec<_>>().join(", ")
}
