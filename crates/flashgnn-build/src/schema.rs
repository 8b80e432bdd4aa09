//! The `flashgnn build` option schema: every option's name, flag, kind,
//! default, accepted values and help, as data. The Python binding exports it
//! as `_core.BUILD_OPTIONS` (the CLI builds its `build` parser from it) and
//! fills [`BuildOptions`] through [`BuildOptions::set_choice`] and
//! [`parse_dtype`], so the importer's options, their spelling and their
//! refusals are written once, here.

use flashgnn_format::Dtype;

use crate::options::{BuildOptions, BuildVerify, FeatureLayout, InputFormat, NanPolicy, Reorder, SelfLoops};
use crate::{BuildError, Result};

/// How a build option's value is written (the CLI picks its argparse type
/// from it; the binding takes the Python value of the same meaning).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionKind {
    /// A boolean switch (`--symmetrize`).
    Flag,
    /// An integer.
    Int,
    /// An integer written in any base (`0x...`).
    Id,
    /// A byte count (`2GiB`).
    Size,
    /// Free text.
    Str,
    /// A file path.
    Path,
    /// `N,D`.
    Pair,
    /// Three fractions `train,val,test`.
    Fractions,
    /// Two fractions `val,test`.
    FractionPair,
    /// One fraction in [0, 1).
    Fraction,
    /// One of [`BuildOption::choices`]'s values.
    Choice,
}

impl OptionKind {
    pub fn name(self) -> &'static str {
        match self {
            OptionKind::Flag => "flag",
            OptionKind::Int => "int",
            OptionKind::Id => "id",
            OptionKind::Size => "size",
            OptionKind::Str => "str",
            OptionKind::Path => "path",
            OptionKind::Pair => "pair",
            OptionKind::Fractions => "fractions",
            OptionKind::FractionPair => "fraction_pair",
            OptionKind::Fraction => "fraction",
            OptionKind::Choice => "choice",
        }
    }
}

/// What a build uses for an option when it is not given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionDefault {
    /// Nothing (the option is optional, or its value is derived).
    None,
    Bool(bool),
    Int(u64),
    Str(String),
}

/// One keyword option of a build (one `flashgnn build` flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildOption {
    /// The keyword (`self_loops`); the flag is `--` and it with dashes.
    pub name: &'static str,
    pub kind: OptionKind,
    /// One-line help (`flashgnn build --help`).
    pub help: &'static str,
}

/// Every keyword option a build reads, in `flashgnn build --help` order.
pub const BUILD_OPTIONS: &[BuildOption] = &[
    opt("format", OptionKind::Choice, "input format (auto: detected from the input)"),
    opt("symmetrize", OptionKind::Flag, "add the reverse of every edge (never guessed)"),
    opt(
        "add_reverse",
        OptionKind::Flag,
        "typed inputs: PyG's ToUndirected (same-type relations made undirected, a rev_<rel> type for the others)",
    ),
    opt(
        "no_edge_ids",
        OptionKind::Flag,
        "typed inputs: no per-relation edge bases in the slots (8 B less per relation and node; batches without e_id)",
    ),
    opt("dedup", OptionKind::Flag, "remove duplicate edges"),
    opt("self_loops", OptionKind::Choice, "keep, drop or add self-loops"),
    opt("feature_dtype", OptionKind::Choice, "convert features to this dtype"),
    opt("feature_layout", OptionKind::Choice, "features inline in the slot page or in a separate file (auto: by size)"),
    opt("reorder", OptionKind::Choice, "locality relabelling (ids stay original)"),
    opt("page_size", OptionKind::Int, "page size in bytes"),
    opt("memory_budget", OptionKind::Size, "hard cap on builder memory"),
    opt("num_nodes", OptionKind::Int, "declared node count (headerless inputs, SNAP)"),
    opt("feat_shape", OptionKind::Pair, "N,D of a headerless raw feature file"),
    opt("feat_dtype", OptionKind::Choice, "dtype of a headerless raw feature file"),
    opt(
        "labels",
        OptionKind::Path,
        "edge-list inputs: node labels, `node label` per line (SNAP's labelled sets; nodes not listed are \
         unlabeled) or a .npy array [N]",
    ),
    opt(
        "features",
        OptionKind::Path,
        "edge-list inputs: node features, a .npy array [N, D] or text with one row of D numbers per line (row = \
         node id)",
    ),
    opt(
        "synthetic_features",
        OptionKind::Int,
        "generate D-wide random features when the input has none (the graph structure then carries all the signal)",
    ),
    opt("make_splits", OptionKind::Fractions, "random train,val,test fractions when the input has no splits"),
    opt("igb_classes", OptionKind::Choice, "IGB label set"),
    opt("num_classes", OptionKind::Int, "declared class count: labels >= it are refused (IGB: from --igb-classes)"),
    opt("ogb_split", OptionKind::Str, "split directory name under split/ (when several exist)"),
    opt("skip_bad_lines", OptionKind::Flag, "skip unparseable text lines; report count and examples"),
    opt("nan", OptionKind::Choice, "NaN/Inf features: fail (error) or replace with 0 (zero)"),
    opt(
        "verify",
        OptionKind::Choice,
        "what is read back and checked before publishing: every file except separate feature rows, which are copied \
         and checksummed as written (encoded), or every byte (all)",
    ),
    opt("seed", OptionKind::Int, "seed of the random choices (splits, synthetic features)"),
    opt(
        "link_split",
        OptionKind::FractionPair,
        "link prediction: hold out these fractions of the edge pairs as validation and test positives (with their \
         reverses, out of the message-passing graph)",
    ),
    opt(
        "disjoint_train_ratio",
        OptionKind::Fraction,
        "link prediction: this fraction of the remaining pairs is training supervision only (not message passing)",
    ),
    opt("neg_per_pos", OptionKind::Int, "link prediction: fixed negatives per validation and test positive"),
    opt("link_split_seed", OptionKind::Int, "seed of the link split (default: --seed)"),
    opt(
        "link_edge_type",
        OptionKind::Str,
        "link prediction on a typed input: the edge type SRC__REL__DST to split (default: the input's only one); \
         held-out edges also leave its --add-reverse rev_ type",
    ),
    opt(
        "link_split_files",
        OptionKind::Path,
        "link prediction: a given split, a directory of link_<split>_<part>.npy int64 arrays (what the OGB .pt import \
         stages)",
    ),
    opt(
        "force",
        OptionKind::Flag,
        "replace an existing flashgnn dataset atomically (never a file, link or other directory)",
    ),
    opt(
        "dataset_id",
        OptionKind::Id,
        "fix the 64-bit dataset id the checksums are bound to (default: random per build; only for byte-identical \
         rebuilds)",
    ),
];

const fn opt(name: &'static str, kind: OptionKind, help: &'static str) -> BuildOption {
    BuildOption { name, kind, help }
}

/// Accepted for `format` besides `InputFormat::ALL`'s names: another name of `snap`.
const FORMAT_ALIASES: &[(&str, InputFormat)] = &[("text", InputFormat::Snap)];
const FLOAT_DTYPES: &[&str] = &["float16", "float32", "float64"];
const IGB_CLASSES: &[&str] = &["19", "2K"];

impl BuildOption {
    /// `--name-with-dashes`.
    pub fn flag(&self) -> String {
        format!("--{}", self.name.replace('_', "-"))
    }

    /// The accepted values of a [`OptionKind::Choice`] option (empty for
    /// the others): the option enums' own lists (`ALL` and `name`).
    pub fn choices(&self) -> Vec<&'static str> {
        match self.name {
            "format" => names(&InputFormat::ALL, InputFormat::name),
            "self_loops" => names(&SelfLoops::ALL, SelfLoops::name),
            "feature_layout" => names(&FeatureLayout::ALL, FeatureLayout::name),
            "reorder" => names(&Reorder::ALL, Reorder::name),
            "nan" => names(&NanPolicy::ALL, NanPolicy::name),
            "verify" => names(&BuildVerify::ALL, BuildVerify::name),
            "feature_dtype" | "feat_dtype" => FLOAT_DTYPES.to_vec(),
            "igb_classes" => IGB_CLASSES.to_vec(),
            _ => Vec::new(),
        }
    }

    /// What a build uses when the option is absent ([`BuildOptions::new`]).
    pub fn default_value(&self) -> OptionDefault {
        let d = BuildOptions::new("", "");
        match self.name {
            "format" => OptionDefault::Str(d.format.name().into()),
            "self_loops" => OptionDefault::Str(d.self_loops.name().into()),
            "feature_layout" => OptionDefault::Str(d.feature_layout.name().into()),
            "reorder" => OptionDefault::Str(d.reorder.name().into()),
            "nan" => OptionDefault::Str(d.nan.name().into()),
            "verify" => OptionDefault::Str(d.verify.name().into()),
            "igb_classes" => OptionDefault::Str(d.igb_classes),
            "page_size" => OptionDefault::Int(d.page_size.into()),
            "memory_budget" => OptionDefault::Int(d.memory_budget),
            "seed" => OptionDefault::Int(d.seed),
            "neg_per_pos" => OptionDefault::Int(d.neg_per_pos.into()),
            "symmetrize" => OptionDefault::Bool(d.symmetrize),
            "add_reverse" => OptionDefault::Bool(d.add_reverse),
            "dedup" => OptionDefault::Bool(d.dedup),
            "no_edge_ids" => OptionDefault::Bool(d.no_edge_ids),
            "skip_bad_lines" => OptionDefault::Bool(d.skip_bad_lines),
            "force" => OptionDefault::Bool(d.force),
            _ => OptionDefault::None,
        }
    }
}

/// The names of `all`, in order.
fn names<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> Vec<&'static str> {
    all.iter().map(|&x| name(x)).collect()
}

/// The value of `all` named `value` (then `aliases`), or an error naming
/// the option `--{flag}`, the value and the accepted ones.
fn pick<T: Copy>(all: &[T], name: fn(T) -> &'static str, aliases: &[(&str, T)], flag: &str, value: &str) -> Result<T> {
    all.iter()
        .copied()
        .find(|&x| name(x) == value)
        .or_else(|| aliases.iter().find(|a| a.0 == value).map(|a| a.1))
        .ok_or_else(|| BuildError::config(format!("--{flag} {value:?}: expected {}", names(all, name).join(", "))))
}

/// The dtype named `name`; `what` (the flag) names it in the error.
pub fn parse_dtype(name: &str, what: &str) -> Result<Dtype> {
    Dtype::parse(name).ok_or_else(|| BuildError::config(format!("{what}: unknown dtype {name:?}")))
}

impl BuildOptions {
    /// Set the [`OptionKind::Choice`] option `name` from its flag value;
    /// an unknown value is refused naming the flag, the value and the
    /// accepted values.
    pub fn set_choice(&mut self, name: &str, value: &str) -> Result<()> {
        match name {
            "format" => self.format = pick(&InputFormat::ALL, InputFormat::name, FORMAT_ALIASES, "format", value)?,
            "self_loops" => self.self_loops = pick(&SelfLoops::ALL, SelfLoops::name, &[], "self-loops", value)?,
            "feature_dtype" => self.feature_dtype = Some(parse_dtype(value, "--feature-dtype")?),
            "feature_layout" => {
                self.feature_layout = pick(&FeatureLayout::ALL, FeatureLayout::name, &[], "feature-layout", value)?
            }
            "reorder" => self.reorder = pick(&Reorder::ALL, Reorder::name, &[], "reorder", value)?,
            "feat_dtype" => self.feat_dtype = Some(parse_dtype(value, "--feat-dtype")?),
            "igb_classes" => self.igb_classes = pick(IGB_CLASSES, |c| c, &[], "igb-classes", value)?.to_string(),
            "nan" => self.nan = pick(&NanPolicy::ALL, NanPolicy::name, &[], "nan", value)?,
            "verify" => self.verify = pick(&BuildVerify::ALL, BuildVerify::name, &[], "verify", value)?,
            _ => return Err(BuildError::config(format!("build option {name:?} is not a choice"))),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_choice_parses_and_defaults_are_choices() {
        for o in BUILD_OPTIONS {
            assert_eq!(o.kind == OptionKind::Choice, !o.choices().is_empty(), "{}", o.name);
            let mut b = BuildOptions::new("", "");
            for c in o.choices() {
                b.set_choice(o.name, c).unwrap();
            }
            if let OptionDefault::Str(d) = o.default_value() {
                assert!(o.choices().contains(&d.as_str()), "{}: {d}", o.name);
            }
        }
        let mut b = BuildOptions::new("", "");
        b.set_choice("format", "text").unwrap();
        assert_eq!(b.format, InputFormat::Snap);
        let e = b.set_choice("self_loops", "nope").unwrap_err().to_string();
        assert_eq!(e, "--self-loops \"nope\": expected keep, drop, add");
    }
}
