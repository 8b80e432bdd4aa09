//! Simulator configuration: every parameter of the model, read from TOML
//! (configs/ssd/*.toml; each field's meaning and source in docs/simulator.md).
//! Unknown fields are refused; every value is checked against its bound and
//! an error names the file, the field, the value and the bound.

use serde::{Deserialize, Serialize};

use crate::{Result, SimError};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub name: String,
    pub host: Host,
    pub controller: Controller,
    pub flash: Flash,
    pub energy: Energy,
    #[serde(default)]
    pub compute: Compute,
    #[serde(default)]
    pub sim: Sim,
    #[serde(default)]
    pub array: Array,
}

/// Several identical SSDs behind one host (docs/simulator.md, "Several
/// SSDs"): data files striped over them in `stripe_bytes` chunks exactly as
/// `flashgnn stripe` places them (chunk `offset / stripe_bytes` of each file
/// on device `chunk % devices`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Array {
    /// Identical SSDs, each with its own NVMe queue, PCIe link, controller
    /// cores, SSD DRAM, channels and dies.
    pub devices: u32,
    /// Chunk size of the round-robin placement (`flashgnn stripe --chunk`,
    /// default 64 KiB).
    pub stripe_bytes: u64,
}

impl Default for Array {
    fn default() -> Self {
        Array { devices: 1, stripe_bytes: 64 << 10 }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// PCIe generation (1-6) and lanes.
    pub pcie_gen: u32,
    pub pcie_lanes: u32,
    /// Share of the raw link rate left for payload after TLP/DLLP overhead.
    pub pcie_efficiency: f64,
    /// NVMe command overhead on the link and in the controller's queues
    /// (submission, doorbell, completion entry), per command.
    pub nvme_command_ns: f64,
    /// Host software stack per I/O (syscall, block layer, driver, interrupt
    /// or poll), split half on submit, half on completion.
    pub stack_ns: f64,
    /// Host CPU time per sampled node (decode a slot, draw neighbors).
    pub cpu_ns_per_node: f64,
    /// Host threads sampling (servers of the host-CPU queue).
    pub cpu_cores: u32,
    /// NVMe commands in flight per batch at most (the engine's depth).
    pub queue_depth: u32,
    /// Commands in flight for the `cc` design, which reads through the
    /// kernel block layer instead of flashgnn's engine (docs/simulator.md,
    /// "Designs", says why the shipped value).
    pub block_queue_depth: u32,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Controller {
    /// Embedded cores (servers of the firmware queue).
    pub cores: u32,
    /// Firmware time per flash command (FTL lookup, scheduling, completion).
    pub firmware_ns_per_command: f64,
    /// Firmware time per command with DirectGraph (physical addresses in the
    /// graph: no FTL translation).
    pub firmware_ns_directgraph: f64,
    /// Embedded-core time per sampled node (SmartSAGE-style sampling).
    pub sample_ns_per_node: f64,
    /// Channel-level router time per command (BG-2: firmware off the path).
    pub router_ns: f64,
    /// SSD DRAM bandwidth (GB/s) and size (bytes).
    pub dram_gbps: f64,
    pub dram_bytes: u64,
    /// SSD DRAM not available to cache flash pages (the FTL's mapping
    /// table, firmware); the rest, `dram_bytes - dram_reserved_bytes`, is an
    /// LRU page cache for the designs that stage whole pages in SSD DRAM.
    pub dram_reserved_bytes: u64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Flash {
    pub channels: u32,
    pub packages: u32,
    /// Dies per package.
    pub dies: u32,
    pub planes: u32,
    pub page_bytes: u32,
    /// Spare (out-of-band) bytes per page: ECC parity and metadata, moved
    /// over the channel with every whole-page transfer.
    pub spare_bytes: u32,
    /// Page read latency tR.
    pub read_ns: f64,
    /// Channel bus rate (mega-transfers/s) and width (bits).
    pub bus_mts: f64,
    pub bus_bits: u32,
    /// Per-command channel overhead (command + address cycles).
    pub command_ns: f64,
    /// Die-level sampler time per sampled node (BG-SP designs).
    pub sampler_ns_per_node: f64,
    /// Multi-plane reads: a die granted to a read also takes up to
    /// `planes - 1` more pages queued for it at that moment into the same tR.
    pub multi_plane: bool,
    /// "stripe" (channel first, then die, then plane) or "hash" (seeded).
    #[serde(default = "stripe")]
    pub mapping: String,
}

fn stripe() -> String {
    "stripe".into()
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Energy {
    pub voltage: f64,
    /// Array read current (tR) and bus current while transferring.
    pub read_current_ma: f64,
    pub bus_current_ma: f64,
    pub pcie_pj_per_bit: f64,
    pub host_dram_pj_per_bit: f64,
    pub ssd_dram_pj_per_bit: f64,
    /// Embedded core power while busy, host core power while sampling.
    pub controller_core_mw: f64,
    pub host_core_mw: f64,
    pub sampler_mw: f64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Compute {
    /// FLOPs of the GNN step per sampled node.
    pub flops_per_node: f64,
    /// Throughput of the host-side accelerator and the in-storage one.
    pub host_flops: f64,
    pub ssd_flops: f64,
    /// Bytes of output per target node sent to the host by in-storage designs.
    pub output_bytes_per_target: f64,
}

impl Default for Compute {
    fn default() -> Self {
        Compute { flops_per_node: 65536.0, host_flops: 1e14, ssd_flops: 6.5e12, output_bytes_per_target: 256.0 }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Sim {
    pub seed: u64,
    /// Replay at most this many batches (0 = all).
    pub max_batches: u64,
}

impl Default for Sim {
    fn default() -> Self {
        Sim { seed: 1, max_batches: 0 }
    }
}

/// Short names accepted by `--sweep` for the commonly swept fields.
pub const SWEEP_ALIASES: &[(&str, &str)] = &[
    ("channels", "flash.channels"),
    ("packages", "flash.packages"),
    ("dies", "flash.dies"),
    ("planes", "flash.planes"),
    ("page_size", "flash.page_bytes"),
    ("tr", "flash.read_ns"),
    ("bus_mts", "flash.bus_mts"),
    ("cores", "controller.cores"),
    ("queue_depth", "host.queue_depth"),
    ("pcie_lanes", "host.pcie_lanes"),
    ("seed", "sim.seed"),
    ("devices", "array.devices"),
    ("stripe_bytes", "array.stripe_bytes"),
];

/// The SSD configs shipped with flashgnn, by name: compiled in from
/// `configs/ssd/`, so an installed wheel (which has no repository beside
/// it) still has them. `--config NAME` and `fit-ssd --base NAME` take a name
/// where no file of that name exists. (`this-machine.toml` is fitted per
/// machine, not shipped.)
pub const BUILTIN: [(&str, &str); 2] = [
    ("beacongnn-table2", include_str!("../../../configs/ssd/beacongnn-table2.toml")),
    ("tlc-conventional", include_str!("../../../configs/ssd/tlc-conventional.toml")),
];

/// A built-in config's text by name (with or without `.toml`).
pub fn builtin(name: &str) -> Option<&'static str> {
    let name = name.strip_suffix(".toml").unwrap_or(name);
    BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

pub fn resolve_alias(p: &str) -> String {
    SWEEP_ALIASES.iter().find(|(a, _)| *a == p).map(|(_, f)| f.to_string()).unwrap_or_else(|| p.to_string())
}

impl Config {
    /// Parse `text` (from `file`), with `overrides` (dotted field, value
    /// text) applied before checking.
    pub fn parse(text: &str, file: &str, overrides: &[(String, String)]) -> Result<Config> {
        let mut v: toml::Value =
            toml::from_str(text).map_err(|e| SimError::Config(format!("{file}: {}", e.to_string().trim())))?;
        // The [array] table is optional (one SSD); fill in its defaults so
        // `--sweep devices=...` has a field to set.
        if let Some(t) = v.as_table_mut() {
            let a = t.entry("array").or_insert_with(|| toml::Value::Table(Default::default()));
            if let Some(a) = a.as_table_mut() {
                let def = Array::default();
                a.entry("devices").or_insert(toml::Value::Integer(def.devices as i64));
                a.entry("stripe_bytes").or_insert(toml::Value::Integer(def.stripe_bytes as i64));
            }
        }
        for (path, val) in overrides {
            set_field(&mut v, &resolve_alias(path), val, file)?;
        }
        let c: Config =
            v.try_into().map_err(|e: toml::de::Error| SimError::Config(format!("{file}: {}", e.to_string().trim())))?;
        c.check(file)?;
        Ok(c)
    }

    /// The config at `path`; a bare name with no such file is looked up
    /// among the built-in configs ([`BUILTIN`]).
    pub fn load(path: &std::path::Path, overrides: &[(String, String)]) -> Result<Config> {
        let file = path.display().to_string();
        if !path.exists() && path.parent().is_none_or(|d| d.as_os_str().is_empty()) {
            if let Some(text) = path.to_str().and_then(builtin) {
                return Config::parse(text, &format!("built-in config {file}"), overrides);
            }
        }
        let bytes = flashgnn_io::read_regular(path).map_err(|e| match SimError::opening(&file, "cannot read", &e) {
            SimError::Input(m) if e.source.kind() == std::io::ErrorKind::NotFound => {
                let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
                SimError::Input(format!("{m} (built-in configs: {})", names.join(", ")))
            }
            other => other,
        })?;
        let text = String::from_utf8(bytes).map_err(|e| {
            SimError::Config(format!("{file}: byte offset {}: not UTF-8 text", e.utf8_error().valid_up_to()))
        })?;
        Config::parse(&text, &file, overrides)
    }

    fn check(&self, file: &str) -> Result<()> {
        let f = |name: &str, v: f64, lo: f64, hi: f64| -> Result<()> {
            if v.is_finite() && v >= lo && v <= hi {
                Ok(())
            } else {
                Err(SimError::Config(format!("{file}: {name} = {v} is out of range [{lo}, {hi}]")))
            }
        };
        let h = &self.host;
        f("host.pcie_gen", h.pcie_gen as f64, 1.0, 6.0)?;
        f("host.pcie_lanes", h.pcie_lanes as f64, 1.0, 32.0)?;
        f("host.pcie_efficiency", h.pcie_efficiency, 0.01, 1.0)?;
        f("host.nvme_command_ns", h.nvme_command_ns, 0.0, 1e9)?;
        f("host.stack_ns", h.stack_ns, 0.0, 1e9)?;
        f("host.cpu_ns_per_node", h.cpu_ns_per_node, 0.0, 1e9)?;
        f("host.cpu_cores", h.cpu_cores as f64, 1.0, 4096.0)?;
        f("host.queue_depth", h.queue_depth as f64, 1.0, 65536.0)?;
        f("host.block_queue_depth", h.block_queue_depth as f64, 1.0, 65536.0)?;
        let c = &self.controller;
        f("controller.cores", c.cores as f64, 1.0, 1024.0)?;
        f("controller.firmware_ns_per_command", c.firmware_ns_per_command, 0.0, 1e9)?;
        f("controller.firmware_ns_directgraph", c.firmware_ns_directgraph, 0.0, 1e9)?;
        f("controller.sample_ns_per_node", c.sample_ns_per_node, 0.0, 1e9)?;
        f("controller.router_ns", c.router_ns, 0.0, 1e9)?;
        f("controller.dram_gbps", c.dram_gbps, 0.001, 1e4)?;
        f("controller.dram_bytes", c.dram_bytes as f64, 1.0, 1e15)?;
        f("controller.dram_reserved_bytes", c.dram_reserved_bytes as f64, 0.0, c.dram_bytes as f64)?;
        let x = &self.flash;
        f("flash.channels", x.channels as f64, 1.0, 1024.0)?;
        f("flash.packages", x.packages as f64, 1.0, 64.0)?;
        f("flash.dies", x.dies as f64, 1.0, 64.0)?;
        f("flash.planes", x.planes as f64, 1.0, 16.0)?;
        if !(512..=65536).contains(&x.page_bytes) || !x.page_bytes.is_power_of_two() {
            return Err(SimError::Config(format!(
                "{file}: flash.page_bytes = {} must be a power of two in [512, 65536]",
                x.page_bytes
            )));
        }
        f("flash.spare_bytes", x.spare_bytes as f64, 0.0, x.page_bytes as f64)?;
        f("flash.read_ns", x.read_ns, 1.0, 1e8)?;
        f("flash.bus_mts", x.bus_mts, 1.0, 1e5)?;
        f("flash.bus_bits", x.bus_bits as f64, 1.0, 64.0)?;
        f("flash.command_ns", x.command_ns, 0.0, 1e8)?;
        f("flash.sampler_ns_per_node", x.sampler_ns_per_node, 0.0, 1e8)?;
        if x.mapping != "stripe" && x.mapping != "hash" {
            return Err(SimError::Config(format!(
                "{file}: flash.mapping = {:?} must be \"stripe\" or \"hash\"",
                x.mapping
            )));
        }
        let a = &self.array;
        // 64 devices: more than any one host's PCIe lanes feed at x4 each.
        f("array.devices", a.devices as f64, 1.0, 64.0)?;
        if a.stripe_bytes == 0 || !a.stripe_bytes.is_multiple_of(4096) || a.stripe_bytes > 1 << 30 {
            return Err(SimError::Config(format!(
                "{file}: array.stripe_bytes = {} must be a positive multiple of 4096 (as `flashgnn stripe --chunk`), at most 1 GiB",
                a.stripe_bytes
            )));
        }
        let e = &self.energy;
        f("energy.voltage", e.voltage, 0.0, 100.0)?;
        f("energy.read_current_ma", e.read_current_ma, 0.0, 1e4)?;
        f("energy.bus_current_ma", e.bus_current_ma, 0.0, 1e4)?;
        f("energy.pcie_pj_per_bit", e.pcie_pj_per_bit, 0.0, 1e4)?;
        f("energy.host_dram_pj_per_bit", e.host_dram_pj_per_bit, 0.0, 1e4)?;
        f("energy.ssd_dram_pj_per_bit", e.ssd_dram_pj_per_bit, 0.0, 1e4)?;
        f("energy.controller_core_mw", e.controller_core_mw, 0.0, 1e6)?;
        f("energy.host_core_mw", e.host_core_mw, 0.0, 1e7)?;
        f("energy.sampler_mw", e.sampler_mw, 0.0, 1e6)?;
        let k = &self.compute;
        f("compute.flops_per_node", k.flops_per_node, 0.0, 1e15)?;
        f("compute.host_flops", k.host_flops, 1.0, 1e18)?;
        f("compute.ssd_flops", k.ssd_flops, 1.0, 1e18)?;
        f("compute.output_bytes_per_target", k.output_bytes_per_target, 0.0, 1e9)?;
        Ok(())
    }

    /// Payload bytes per second of the PCIe link.
    pub fn pcie_bytes_per_s(&self) -> f64 {
        let (gts, enc) = match self.host.pcie_gen {
            1 => (2.5, 0.8),
            2 => (5.0, 0.8),
            3 => (8.0, 128.0 / 130.0),
            4 => (16.0, 128.0 / 130.0),
            5 => (32.0, 128.0 / 130.0),
            _ => (64.0, 242.0 / 256.0),
        };
        gts * 1e9 * enc / 8.0 * self.host.pcie_lanes as f64 * self.host.pcie_efficiency
    }

    /// Bytes per second of one flash channel.
    pub fn channel_bytes_per_s(&self) -> f64 {
        self.flash.bus_mts * 1e6 * self.flash.bus_bits as f64 / 8.0
    }

    /// Flash pages the SSD-DRAM page cache holds.
    pub fn dram_cache_pages(&self) -> u64 {
        (self.controller.dram_bytes - self.controller.dram_reserved_bytes) / self.flash.page_bytes as u64
    }

    pub fn dies_per_channel(&self) -> u32 {
        self.flash.packages * self.flash.dies
    }
}

/// Set dotted `path` in `v` to `val` (parsed as an integer, a float, a
/// boolean or else a string), refusing a path the config does not have.
fn set_field(v: &mut toml::Value, path: &str, val: &str, file: &str) -> Result<()> {
    let mut cur = v;
    let parts: Vec<&str> = path.split('.').collect();
    for (k, p) in parts.iter().enumerate() {
        let t = cur.as_table_mut().ok_or_else(|| SimError::Config(format!("{file}: {path}: not a table at {p:?}")))?;
        if k + 1 == parts.len() {
            let old = t.get(*p).ok_or_else(|| {
                SimError::Config(format!(
                    "{file}: no field {path} to set (sweep names: {})",
                    SWEEP_ALIASES.iter().map(|a| a.0).collect::<Vec<_>>().join(", ")
                ))
            })?;
            let new = match old {
                toml::Value::Integer(_) => val.parse::<i64>().map(toml::Value::Integer).ok(),
                toml::Value::Float(_) => val.parse::<f64>().map(toml::Value::Float).ok(),
                toml::Value::Boolean(_) => val.parse::<bool>().map(toml::Value::Boolean).ok(),
                toml::Value::String(_) => Some(toml::Value::String(val.to_string())),
                _ => None,
            }
            .ok_or_else(|| SimError::Config(format!("{file}: {path} = {val:?} is not a valid {}", old.type_str())))?;
            t.insert(p.to_string(), new);
            return Ok(());
        }
        cur = t.get_mut(*p).ok_or_else(|| SimError::Config(format!("{file}: no table {p:?} for {path}")))?;
    }
    Ok(())
}
