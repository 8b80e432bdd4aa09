//! Publishing: the temporary directory the build writes into, the
//! manifest, the verify of the new files, and the rename that makes the
//! dataset visible at the output path.
//!
//! Invariants: nothing is visible at the output path until every file is
//! written, fsynced, checksummed and verified (read back and checked, but
//! for copied feature rows under the default `--verify encoded`); any
//! error, panic or cancellation removes the temporary directory
//! ([`TmpGuard`]); the manifest is checked against the invariants readers
//! rely on before it is written.

use std::path::{Path, PathBuf};
use std::time::Instant;

use flashgnn_format::layout::{DegreeHistogram, FeaturePlacement};
use flashgnn_format::manifest::*;
use flashgnn_format::FORMAT_VERSION_HOMOGENEOUS;
use flashgnn_io::{publish_dir_on, Disk, OutFile};

use super::edges::EdgeResult;
use super::layout::Laid;
use super::plan::FeaturePlan;
use super::side::Side;
use crate::options::{BuildOptions, Reorder};
use crate::progress::Progress;
use crate::Result;

/// Removes the temporary directory unless disarmed (errors, panics,
/// Ctrl-C), through the disk it was created on.
pub(super) struct TmpGuard(pub(super) Option<PathBuf>, pub(super) Disk);
impl Drop for TmpGuard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = self.1.remove_path(&p);
        }
    }
}

/// Remove the temporaries that killed runs left beside `out` (owner marker,
/// owner gone) and say so on stderr; returns their paths for the report.
pub fn report_stale_tmps(out: &Path) -> Vec<String> {
    flashgnn_io::remove_stale_tmps(out)
        .into_iter()
        .map(|(p, pid)| {
            eprintln!(
                "flashgnn: removed stale temporary {} (left by process {pid}, which is no longer running)",
                p.display()
            );
            p.display().to_string()
        })
        .collect()
}

/// Publish only what reads back clean: a verify of the new files, all
/// of them but (by default) copied feature rows (`BuildVerify`), then the
/// temporary directory renamed to `out`.
pub(super) fn verify_and_publish(tmp: &Path, out: &Path, opts: &BuildOptions, progress: &Progress) -> Result<()> {
    let ds = flashgnn_store::Dataset::open(tmp)?;
    let mut task = progress.task("verify", "B", 0);
    let mut last = 0;
    flashgnn_store::verify_scope(&ds, opts.verify, &mut |done, total| {
        task.set_total(total);
        task.add(done - last);
        last = done;
    })?;
    task.finish();
    drop(task);
    progress.check()?;
    publish_dir_on(&opts.disk, tmp, out)?;
    Ok(())
}

/// The manifest of what the phases wrote and counted.
#[allow(clippy::too_many_arguments)]
pub(super) fn manifest_of(
    opts: &BuildOptions,
    t0: Instant,
    er: &EdgeResult,
    side: &Side,
    features: &FeaturePlan,
    laid: Laid,
    layout_seconds: f64,
    fmt_name: String,
) -> Manifest {
    let Laid { files, layout, cap, hist, spilled_nodes } = laid;
    let (n, feat_dim, feat_dtype, placement) = (er.num_nodes, features.dim, features.dtype, features.placement);
    Manifest {
        magic: MANIFEST_MAGIC.into(),
        format_version: FORMAT_VERSION_HOMOGENEOUS,
        created_by: format!("flashgnn {}", env!("CARGO_PKG_VERSION")),
        page_size: opts.page_size,
        num_nodes: n,
        num_edges: er.num_entries,
        id_bytes: 4,
        features: FeatureInfo {
            dim: feat_dim,
            dtype: feat_dtype,
            placement: if placement == FeaturePlacement::Inline { "inline" } else { "separate" }.into(),
            synthetic: opts.synthetic_features.is_some(),
        },
        graph: flashgnn_format::manifest::GraphInfo {
            inline_cap: cap,
            slot_bytes: layout.slot_bytes,
            slots_per_page: layout.slots_per_page,
            overflow_entries: layout.overflow_entries,
            rel_counts: layout.rel_counts,
        },
        degree: DegreeStats {
            min: er.degrees.iter().copied().min().unwrap_or(0) as u64,
            max: er.degrees.iter().copied().max().unwrap_or(0) as u64,
            mean: if n > 0 { er.num_entries as f64 / n as f64 } else { 0.0 },
            median: hist.quantile(0.5).unwrap_or(DegreeHistogram::BUCKETS as u64),
            p99: hist.quantile(0.99).unwrap_or(DegreeHistogram::BUCKETS as u64),
            isolated: er.isolated,
            no_neighbors: Some(hist.counts[0]),
            spilled_nodes,
        },
        labels: side.labels.clone(),
        splits: side.splits.iter().cloned().collect(),
        reorder: match opts.reorder {
            Reorder::None => "none",
            Reorder::Degree => "degree",
        }
        .into(),
        build: BuildInfo {
            source: opts.input.display().to_string(),
            source_format: fmt_name,
            symmetrize: opts.symmetrize,
            dedup: opts.dedup,
            self_loops: format!("{:?}", opts.self_loops).to_lowercase(),
            input_edges: er.input_edges,
            self_loops_dropped: er.self_loops_dropped,
            self_loops_added: er.self_loops_added,
            duplicates_removed: er.duplicates_removed,
            splits_made: side.splits_made.clone(),
            reverse_duplicates_removed: er.reverse.merged,
            input_edges_distinct: er.reverse.distinct_input,
            input_edges_with_reverse: er.reverse.present,
            preprocess_seconds: er.seconds,
            feature_seconds: side.feature_seconds,
            layout_seconds,
            total_seconds: t0.elapsed().as_secs_f64(),
            peak_rss_bytes: flashgnn_io::rss::peak_rss_bytes(),
            memory_budget_bytes: opts.memory_budget,
            sort_runs: er.runs,
            add_reverse: false,
            relations: Vec::new(),
        },
        files: files.into_iter().map(|(name, bytes, crc32c)| (name, FileEntry { bytes, crc32c })).collect(),
        dataset_id: opts.dataset_id,
        types: None,
        link_split: None,
    }
}

/// Write `manifest.json` once the manifest holds the invariants readers
/// rely on.
pub(super) fn write_manifest(disk: &Disk, tmp: &Path, manifest: &Manifest) -> Result<()> {
    manifest.layout("manifest")?; // the invariants we promise readers hold
    let mut m = OutFile::create_on(disk, tmp.join(MANIFEST_FILE))?;
    m.write(manifest.to_json().as_bytes())?;
    m.finish()?;
    Ok(())
}
