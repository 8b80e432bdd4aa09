//! A batch of unit operations as a caller wrote it (`apply([("add_edge",
//! dst, src), ...])`), checked and turned into [`Op`]s. The bindings only
//! convert each entry's values to [`Arg`]s; which values an operation takes,
//! and every refusal (naming the entry), are decided here, against [`OPS`].

use flashgnn_store::{Op, Snapshot};

use crate::graph::{op_fields, MutableGraph};
use crate::{MutError, Result};

/// One value of a batch entry as given, before it is checked.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    Int(i64),
    Str(String),
    /// A 1-D array of float64 (an embedding).
    Floats(Vec<f64>),
    /// Anything else (a float, a nested list, an integer beyond i64 ...).
    Other,
}

/// One entry of a batch: its values, name first, or `None` when the entry
/// is not a tuple.
pub type Entry = Option<Vec<Arg>>;

impl MutableGraph {
    /// The operations of `entries`, checked against [`OPS`] (name, arity,
    /// value types, non-negative ids) and with embeddings encoded for the
    /// feature width and dtype of one snapshot. The first bad entry is
    /// refused as `ops[i]: ...`. Ids are range-checked by [`apply`](Self::apply).
    pub fn parse_batch(&self, entries: &[Entry]) -> Result<Vec<Op>> {
        // Rows are encoded for one snapshot, taken once rather than per op.
        let snap = self.snapshot();
        entries.iter().enumerate().map(|(i, e)| parse_op(&snap, e.as_deref()).map_err(|m| bad(i, m))).collect()
    }
}

fn bad(i: usize, m: String) -> MutError {
    MutError::Invalid(format!("ops[{i}]: {m}"))
}

/// One entry as an [`Op`]; the error is the message without its `ops[i]: `.
fn parse_op(snap: &Snapshot, t: Option<&[Arg]>) -> std::result::Result<Op, String> {
    let t = t.ok_or("expected a tuple like (\"add_edge\", dst, src)")?;
    let Some(first) = t.first() else {
        return Err("empty tuple".into());
    };
    let Arg::Str(name) = first else {
        return Err("the first element must be the operation name".into());
    };
    let want = op_fields(name).map_err(|e| e.to_string())?.len() + 1;
    if t.len() != want {
        return Err(format!("{name} takes {} arguments, got {}", want - 1, t.len() - 1));
    }
    let int = |k: usize, what: &str| match t[k] {
        Arg::Int(v) if v < 0 => Err(format!("{what} {v} out of range [0, {})", snap.num_nodes())),
        Arg::Int(v) => Ok(v as u64),
        _ => Err(format!("{what} must be an integer")),
    };
    let embed = |k: usize| match &t[k] {
        Arg::Floats(e) => snap.delta.encode_row(e).map_err(|e| e.to_string()),
        _ => Err("embed must be a 1-D float64 array".to_string()),
    };
    Ok(match name.as_str() {
        "add_vertex" => Op::AddVertex { id: None, row: embed(1)? },
        "delete_vertex" => Op::DeleteVertex { vid: int(1, "vid")? },
        "add_edge" => Op::AddEdge { dst: int(1, "dst")?, src: int(2, "src")? },
        "delete_edge" => Op::DeleteEdge { dst: int(1, "dst")?, src: int(2, "src")? },
        _ => Op::UpdateEmbed { vid: int(1, "vid")?, row: embed(2)? },
    })
}
