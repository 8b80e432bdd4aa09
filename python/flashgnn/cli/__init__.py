"""The ``flashgnn`` command line: ``generate``, ``build``, ``info``, ``verify``, ``scrub``, ``compact``, ..., ``serve``, ``query``.

Every long command shows tqdm progress and ends with one summary line.
Errors print one line naming file, position, value and bound, and exit 2
(bad input / corrupt data) or 1 (other failures).
"""

from __future__ import annotations

import argparse
import sys

import flashgnn
from flashgnn import _core
from flashgnn._util import ArgumentParser, HelpFormatter, human_bytes, parse_rate, parse_size  # noqa: F401
from flashgnn._util import print_json as _print_json  # noqa: F401 - re-exported


def _pair(text: str) -> tuple[int, int]:
    try:
        n, d = (int(x) for x in text.split(","))
        return n, d
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N,D (e.g. 100000000,1024), got {text!r}") from None


def _fractions(text: str) -> tuple[float, float, float]:
    try:
        a, b, c = (float(x) for x in text.split(","))
        return a, b, c
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected three fractions train,val,test (e.g. 0.6,0.2,0.2), got {text!r}") from None


def _fraction_pair(text: str) -> tuple[float, float]:
    try:
        a, b = (float(x) for x in text.split(","))
        return a, b
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected two fractions val,test (e.g. 0.1,0.2), got {text!r}") from None


def count(lo: int):
    """An argparse type: an integer >= ``lo`` (a negative count never reaches the engine's unsigned types)."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {lo}, got {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"{v} is out of range: must be >= {lo}")
        return v

    return parse


def _float_in(expected: str, ok, bound: str):
    """An argparse type for a float that ``ok`` accepts, refused as "expected
    {expected}, got X" or "X is out of range: must be {bound}"."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"{text} is out of range: must be {bound}")
        return v

    return parse


_seconds = _float_in("seconds", lambda v: v > 0 and v != float("inf"), "a finite number of seconds > 0")
_unit = _float_in("a number in [0, 1]", lambda v: 0.0 <= v <= 1.0, "in [0, 1]")


def add_quiet(p: argparse.ArgumentParser) -> None:
    """``-q/--quiet``, as ``flashgnn train`` has it: no progress, no notes; errors and the final summary line."""
    p.add_argument("--quiet", "-q", action="store_true", help="print only errors and the final summary line")


# How the CLI reads each kind of build option (`_core.BUILD_OPTIONS`, owned by
# crates/flashgnn-python/src/job.rs, which also parses the values).
_BUILD_KINDS = {
    "int": {"type": count(0)},
    "id": {"type": lambda s: int(s, 0), "metavar": "ID"},
    "size": {"type": parse_size},
    "str": {},
    "path": {"metavar": "FILE"},
    "pair": {"type": _pair, "metavar": "N,D"},
    "fractions": {"type": _fractions, "metavar": "TRAIN,VAL,TEST"},
    "fraction_pair": {"type": _fraction_pair, "metavar": "VAL,TEST"},
    "fraction": {"type": float, "metavar": "R"},
    "choice": {},
}


def _build_options(b: argparse.ArgumentParser) -> None:
    """``flashgnn build``'s options: exactly the binding's ``BUILD_OPTIONS``,
    with its defaults, accepted values and help."""
    for o in _core.BUILD_OPTIONS:
        if o["kind"] == "flag":
            b.add_argument(o["flag"], action="store_true", help=o["help"])
            continue
        kw = dict(_BUILD_KINDS[o["kind"]])
        if o["name"] == "num_classes":
            kw["type"] = int  # cmd_build names its whole range, [1, 2^31 - 1], for 0 and negatives alike
        if o["choices"]:
            kw["choices"] = list(o["choices"])
        b.add_argument(o["flag"], dest=o["name"], default=o["default"], help=o["help"], **kw)


def _parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="flashgnn", description="GNNs over SSD-resident graphs.")
    p.add_argument("--version", action="version", version=f"flashgnn {flashgnn.__version__} (format v{flashgnn.FORMAT_VERSION})")
    sub = p.add_subparsers(dest="command", required=True)
    _dataset_parsers(sub)
    _storage_parsers(sub)
    _training_parsers(sub)
    _upkeep_parsers(sub)

    from flashgnn.serve.cli import add_parsers as serve_parsers

    serve_parsers(sub, parse_size)  # `serve` and `query` (docs/serving.md)
    _group_commands(p, sub)
    return p


def _dataset_parsers(sub) -> None:
    """`generate`, `build` and `info`."""
    g = sub.add_parser("generate", help="generate a synthetic graph in the npy-directory layout")
    gsub = g.add_subparsers(dest="model", required=True)
    r = gsub.add_parser("rmat", help="R-MAT/Kronecker power-law graph with homophilous labels")
    r.add_argument("out")
    gd = _core.GENERATE_DEFAULTS  # RmatOptions::default, so `flashgnn generate` and flashgnn.generate() agree
    r.add_argument("--scale", type=count(1), default=gd["scale"], help="2^scale nodes, at most 31")
    r.add_argument("--edge-factor", type=count(0), default=gd["edge_factor"], help="directed edges per node")
    r.add_argument("--dim", type=count(0), default=gd["dim"], help="feature width")
    r.add_argument("--dtype", default=gd["dtype"], choices=_core.GENERATE_CHOICES["dtype"], help="feature dtype")
    r.add_argument("--edge-dtype", default=gd["edge_dtype"], choices=_core.GENERATE_CHOICES["edge_dtype"],
                   help="dtype of edge_index.npy: int32/uint32 take 8 B per edge instead of 16")
    r.add_argument("--classes", type=count(1), default=gd["classes"], help="label classes (communities)")
    r.add_argument("--seed", type=count(0), default=gd["seed"], help="seed of every random choice")
    r.add_argument("--homophily", type=_unit, default=gd["homophily"],
                   help="share of edges rewired inside the source's community")
    r.add_argument("--feature-signal", type=float, default=gd["feature_signal"],
                   help="centroid separation: ~2x this many noise std-devs")
    r.add_argument("--split", type=_fractions, default=gd["split"], help="train,val,test fractions")
    r.add_argument("--force", action="store_true", default=gd["force"], help="replace an existing output directory")
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    add_quiet(r)
    _igbh_parser(gsub)

    b = sub.add_parser("build", help="import a raw graph into a flashgnn dataset")
    b.add_argument("input", help="npy directory, IGB root, OGB root, or a SNAP text edge list (.gz ok)")
    b.add_argument("out")
    _build_options(b)
    b.add_argument("--derive-features", choices=("mean",), default=None,
                   help="typed npy input: node types without features get the mean of their typed neighbours' rows "
                        "(MAG240M's baseline for authors and institutions; default: none)")
    b.add_argument("--json", action="store_true", help="print the report as JSON")
    add_quiet(b)

    i = sub.add_parser("info", help="counts, degree statistics, sizes and overhead of a dataset")
    i.add_argument("dataset")
    i.add_argument("--json", action="store_true")


def _papers(text: str) -> int:
    """``generate igbh --scale``: a paper count (``250000``, ``2.5e5``) or an IGBH size name (``tiny`` ... ``full``)."""
    sizes = _core.IGBH_SIZES
    if text in sizes:
        return sizes[text]
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of papers or one of {', '.join(sizes)}, got {text!r}") from None
    if not v >= 1 or v != int(v):
        raise argparse.ArgumentTypeError(f"{text} is out of range: must be a whole number of papers >= 1")
    return int(v)


def _igbh_parser(gsub) -> None:
    """`generate igbh`: an IGBH-shaped heterogeneous graph (flashgnn-datagen's igbh module), written as a
    typed npy directory. `generate rmat` is unchanged beside it."""
    gd = _core.GENERATE_IGBH_DEFAULTS  # IgbhOptions::default
    sizes = ", ".join(f"{k}={v:,}" for k, v in _core.IGBH_SIZES.items())
    h = gsub.add_parser(
        "igbh", help="IGB-heterogeneous-shaped typed graph (paper/author/institute/fos[/journal/conference])",
        description="Synthetic IGBH-shaped heterogeneous graph in the typed npy-directory layout: "
                    "DIR/<ntype>/node_feat.npy, DIR/paper/node_label.npy and {train,val,test}_idx.npy, "
                    "DIR/<src>__<rel>__<dst>/edge_index.npy, DIR/num_nodes.json. --scale is the number of papers; "
                    "the other node and edge counts follow IGBH's published sizes (exact at "
                    f"{sizes} papers, interpolated between them).")
    h.add_argument("out", nargs="?", help="output directory (or --out)")
    h.add_argument("--out", dest="out_flag", metavar="DIR", help="output directory (instead of the positional)")
    h.add_argument("--scale", type=_papers, default=gd["scale"],
                   help="number of papers, or an IGBH size name (tiny, small, medium, large, full)")
    h.add_argument("--feature-dim", type=count(0), default=gd["feature_dim"],
                   help="feature width of every node type (IGBH: 1024); 0 writes no features")
    h.add_argument("--dtype", default=gd["dtype"], choices=_core.GENERATE_CHOICES["dtype"], help="feature dtype")
    h.add_argument("--edge-dtype", default=gd["edge_dtype"], choices=_core.GENERATE_CHOICES["edge_dtype"],
                   help="dtype of every edge_index.npy: int32/uint32 take 8 B per edge instead of 16")
    h.add_argument("--classes", type=count(1), default=gd["classes"], help="paper label classes (IGBH: 19)")
    h.add_argument("--seed", type=count(0), default=gd["seed"], help="seed of every random choice")
    h.add_argument("--homophily", type=_unit, default=gd["homophily"],
                   help="share of edges whose destination is moved into the source's class")
    h.add_argument("--feature-signal", type=float, default=gd["feature_signal"],
                   help="centroid separation: ~2x this many noise std-devs")
    h.add_argument("--labeled", type=_unit, default=gd["labeled"], help="share of papers with a label (others -1)")
    h.add_argument("--split", type=_fractions, default=gd["split"], help="train,val,test fractions of labeled papers")
    h.add_argument("--venues", default=gd["venues"], choices=_core.GENERATE_CHOICES["venues"],
                   help="journal/conference types and relations: auto = from IGBH-large's 100M papers up")
    h.add_argument("--force", action="store_true", default=gd["force"], help="replace an existing output directory")
    h.add_argument("--json", action="store_true", help="print the report as JSON")
    add_quiet(h)


def _storage_parsers(sub) -> None:
    """The storage benchmarks and the SSD simulator (`bench`, `trace`, `simulate`, `plot-trace`, `fit-ssd`),
    and `stripe`, which spreads a dataset over devices."""
    from flashgnn.sample.budget import parse_budget

    be = sub.add_parser("bench", help="benchmark the sampling engines against the device and each other")
    be.add_argument("dataset")
    be.add_argument("--engine", default="all", help="|".join((*flashgnn.sample.sampler.ENGINES, "all")) + " (comma list ok)")
    be.add_argument("--batch-size", type=count(1), default=1024, help="seed nodes per batch")
    be.add_argument("--fanout", default="25,10", help="neighbors per hop, comma separated (-1 = all)")
    be.add_argument("--batches", type=count(1), default=20, help="batches timed per engine")
    be.add_argument("--depth", type=count(1), default=256, help="reads in flight for uring and the probe")
    be.add_argument("--workers", type=int, default=None,
                    help="producer threads per engine, each with its own ring (default: the cores this process may "
                         "use — CPU affinity and cgroup quota — as many as fit --memory-budget / --memory-limit)")
    be.add_argument("--max-seconds", type=_seconds, default=120.0, help="stop a slow engine after this long (figures cover what it did)")
    be.add_argument("--memory-limit", type=parse_size, help="cgroup memory cap per engine run (page cache dropped first)")
    be.add_argument("--cache-budget", type=parse_size,
                    help="DRAM cache bytes for the uring+cache row (overrides --memory-budget)")
    be.add_argument("--memory-budget", type=parse_budget, default="auto",
                    help="one budget split between the engine's buffers, the prefetch window and the uring+cache row's "
                         "cache, the split printed in one line: auto (default: sized from what the engine child may "
                         "use — the --memory-limit cap, else available memory — minus a reserve for the interpreter), "
                         "a size, or 0 (no uring+cache row unless --cache-budget)")
    be.add_argument("--cache-policy", default="s3fifo", choices=["s3fifo", "clock"])
    be.add_argument("--cache-hot", default="auto", choices=["auto", "touches", "degree", "presample", "none"],
                    help="how the static hot set is chosen (auto: touches, or degree on a typed dataset)")
    be.add_argument("--hot-fraction", type=_unit, default=flashgnn.sample.sampler.DEFAULT_HOT_FRACTION,
                    help="share of the cache budget for the static hot set (see docs/benchmarks.md)")
    be.add_argument("--reuse", action="store_true",
                    help="print the RDMA study's model of feature reuse between consecutive batches next to the "
                         "measured reuse (with --engine none: only that)")
    be.add_argument("--probe-seconds", type=_seconds, default=2.0, help="length of the device probe (QD1, deep queue)")
    be.add_argument("--trace", metavar="OUT", help="also record a trace of the same batches (uring engine, a separate "
                                                  "pass) for `flashgnn simulate`; the probe figures go into its header; replaces only an existing trace file")
    be.add_argument("--seed", type=count(0), default=0, help="seed order and neighbor draws")
    be.add_argument("--plots", metavar="DIR", help="PNG figures of each engine's reads in flight over time and at "
                                                  "submission (and, with --trace, of the trace's measured queue "
                                                  "depth) into DIR; needs the plots extra (matplotlib)")
    be.add_argument("--json", action="store_true")

    tr = sub.add_parser("trace", help="record every read the sampling engine issues (docs/trace.md)")
    tr.add_argument("dataset")
    tr.add_argument("out", help="trace file to write")
    tr.add_argument("--fanout", default="25,10", help="neighbors per hop, comma separated (-1 = all); a typed "
                    "dataset: for every edge type not in --type-fanouts")
    tr.add_argument("--type-fanouts", help="typed datasets: per edge type fanouts, 'SRC__REL__DST=15,10' entries "
                    "separated by spaces (as flashgnn train takes)")
    tr.add_argument("--batch-size", default="1024",
                    help="seeds per batch; a comma list (256,512,1024) writes one trace per size, OUT with .bsN "
                         "before its suffix (t.fgt -> t.bs256.fgt), for `simulate t.fgt --sweep batch_size=...`")
    tr.add_argument("--batches", type=count(1), default=10, help="batches traced")
    tr.add_argument("--engine", default="uring", help="|".join(flashgnn.sample.sampler.ENGINES) + " (timings are the engine's)")
    tr.add_argument("--depth", type=count(1), default=256, help="reads in flight")
    tr.add_argument("--seed", type=count(0), default=0, help="seed order and neighbor draws")
    tr.add_argument("--force", action="store_true", help="replace an existing trace file")
    tr.add_argument("--json", action="store_true", help="print the report as JSON")
    add_quiet(tr)

    sm = sub.add_parser("simulate", help="replay a trace through the SSD design simulator (docs/simulator.md)")
    sm.add_argument("trace")
    sm.add_argument("--config", required=True, help="TOML SSD config file, or a built-in one by name: "
                                                    + ", ".join(sorted(_core.SSD_BUILTIN_CONFIGS)))
    sm.add_argument("--design", default="all", help="|".join([*_core.SSD_DESIGNS, "all"]) + " (comma list ok)")
    sm.add_argument("--sweep", help="PARAM=V1,V2,... (channels, dies, packages, page_size, bus_mts, cores, tr, "
                                    "queue_depth, or a dotted config field; batch_size replays the traces "
                                    "`flashgnn trace --batch-size V1,V2,...` wrote)")
    sm.add_argument("--plots", metavar="DIR", help="also write PNG figures into DIR (needs the plots extra: "
                                                  "matplotlib)")
    sm.add_argument("--no-timing", action="store_true", help="leave the wall-clock speed out (byte-identical output)")
    sm.add_argument("--json", action="store_true")

    pt = sub.add_parser("plot-trace", help="PNG figures of the reads in flight a trace's engine measured")
    pt.add_argument("trace")
    pt.add_argument("--plots", metavar="DIR", required=True, help="directory for the PNG figures")
    pt.add_argument("--json", action="store_true")

    fs = sub.add_parser("fit-ssd", help="fit a `this-machine` simulator config from the device probe alone")
    fs.add_argument("file", help=f"a large file on the device (e.g. a dataset's {_core.GRAPH_FILE}); read with "
                                 "O_DIRECT")
    fs.add_argument("out", help="TOML config to write")
    fs.add_argument("--base", default=None, help="config file or built-in name supplying the unfitted parameters (default: beacongnn-table2, built in)")
    fs.add_argument("--depth", default="256",
                    help="deep-queue probe depth (the model saturates at the IOPS measured there); a comma list "
                         "(64,128,256) writes one config per depth, OUT with .qdN before its suffix")
    fs.add_argument("--seconds", type=_seconds, default=2.0, help="length of each probe")
    fs.add_argument("--dataset", help="dataset to calibrate host CPU per sampled node on (default: FILE's directory "
                                      "when it is a dataset; none: keep the base's host CPU)")
    fs.add_argument("--force", action="store_true")

    st = sub.add_parser("stripe", help="spread a dataset's data files over several directories/devices")
    st.add_argument("dataset")
    st.add_argument("dirs", nargs="+", help="one directory per device")
    st.add_argument("--chunk", type=parse_size, default=64 << 10, help="stripe unit, a multiple of 4KiB")
    add_quiet(st)


def _training_parsers(sub) -> None:
    """`train`, `embed` and `presample`."""
    from flashgnn.sample.budget import parse_budget

    from flashgnn.train.config import default as train_default  # presample shares train's defaults (same batches)
    from flashgnn.train.config import parser as train_parser

    sub.add_parser("train", help="train a GNN (sage|gcn|gin|gat|mlp) with the flashgnn loader",
                   parents=[train_parser()], add_help=False, conflict_handler="resolve")

    em = sub.add_parser("embed", help="layer-wise full-graph inference to an embedding table")
    em.add_argument("dataset")
    em.add_argument("out", help="output directory (embeddings.npy, predictions.npy, embed.json; a typed dataset: "
                    "embeddings/<node type>.npy, predictions/<target>.npy)")
    em.add_argument("--checkpoint", required=True,
                    help="directory written by `flashgnn train --checkpoint`; with --model-class also a "
                         "torch.save(model.state_dict()) file")
    em.add_argument("--model-class", metavar="PKG.MODULE:CLASS", default=None,
                    help="your model's class (a BasicGNN or a module with num_layers + layer(i, x, edge_index)); "
                         "default: the built-in model the flashgnn checkpoint names")
    em.add_argument("--model-kwargs", metavar="JSON", default=None,
                    help="constructor arguments of --model-class as a JSON object (default: model_kwargs.json "
                         "beside the weights, else none)")
    em.add_argument("--output", default="logits", choices=["logits", "hidden"], help="last layer, or the one before it")
    em.add_argument("--batch-size", type=count(1), default=16384, help="target nodes per engine call")
    em.add_argument("--engine", default="auto", help="|".join(flashgnn.sample.sampler.ENGINE_CHOICES))
    em.add_argument("--memory-budget", type=parse_budget, default="auto",
                    help="DRAM cache for the layer passes (layers after the first re-read the structure through "
                         "it): auto (default: sized from available memory, the split printed), a size, or 0")
    em.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    em.add_argument("--force", action="store_true", help="replace an existing output directory")
    em.add_argument("--json", action="store_true", help="print the report as JSON")
    add_quiet(em)

    from flashgnn import recommend as rec  # no torch, no faiss at import: the defaults only

    rc = sub.add_parser("recommend", help="top-k nodes per node by the dot product of embeddings: exact in "
                        "bounded memory, or through a faiss index (recall reported)")
    rc.add_argument("dataset")
    src = rc.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", help="a `flashgnn train --checkpoint` directory: its embeddings are computed "
                     "first (as `flashgnn embed`)")
    src.add_argument("--embeddings", help="embeddings.npy, or the directory `flashgnn embed` wrote")
    rc.add_argument("--k", type=int, default=10, help="recommendations per query (default 10)")
    rc.add_argument("--exclude-seen", action="store_true",
                    help="never recommend a query's current neighbours (read from the dataset) or itself")
    rc.add_argument("--nodes", default=None, help="queries: A:B, an .npy of ids or a text file of ids (default: "
                    "every node)")
    rc.add_argument("--candidates", default=None, help="candidate ids A:B (default: every node)")
    rc.add_argument("--index", default="exact", choices=rec.INDEXES,
                    help="exact (blocked matrix products, bounded memory) or faiss (ANN, recall reported)")
    rc.add_argument("--faiss-index", default=rec.DEFAULT_FAISS_INDEX,
                    help=f"faiss index factory string, inner-product metric (default {rec.DEFAULT_FAISS_INDEX})")
    rc.add_argument("--faiss-params", default=rec.DEFAULT_FAISS_PARAMS,
                    help=f"faiss search parameters (default {rec.DEFAULT_FAISS_PARAMS})")
    rc.add_argument("--recall-sample", type=count(0), default=rec.DEFAULT_RECALL_SAMPLE,
                    help="--index faiss: queries whose answer is checked against the exact one (default "
                         f"{rec.DEFAULT_RECALL_SAMPLE}; 0 = none)")
    rc.add_argument("--memory-budget", type=parse_size, default=rec.DEFAULT_MEMORY_BUDGET,
                    help="bound on what one exact step holds beyond the table's mapped pages; sets the block sizes "
                         "(default 1GiB)")
    rc.add_argument("--query-block", type=count(1), default=None, help="queries per block (default: from the budget)")
    rc.add_argument("--candidate-block", type=count(1), default=None,
                    help="candidates per block (default: from the budget)")
    rc.add_argument("--out", default=None, help="output directory (ids.npy, scores.npy, queries.npy, "
                    "recommend.json); default: nothing written, the summary printed")
    rc.add_argument("--force", action="store_true", help="replace an existing output directory")
    rc.add_argument("--json", action="store_true", help="print the report as JSON")
    add_quiet(rc)

    ps = sub.add_parser("presample", help="sample E training epochs once and store the subgraphs "
                        "(then `flashgnn train --presampled DIR`)")
    ps.add_argument("dataset")
    ps.add_argument("out", help="output directory (presample.json, epoch-EEEE.fgps)")
    ps.add_argument("--epochs", type=count(1), default=train_default("epochs"),
                    help="epochs stored; as `flashgnn train --epochs` (it may read fewer)")
    ps.add_argument("--fanout", default=train_default("fanout"), help="as `flashgnn train --fanout`")
    ps.add_argument("--batch-size", type=count(1), default=train_default("batch_size"),
                    help="as `flashgnn train --batch-size`")
    ps.add_argument("--seed", type=int, default=train_default("seed"),
                    help="as `flashgnn train --seed` (same batches)")
    ps.add_argument("--split", default="train", help="the stored split to sample (training reads 'train')")
    ps.add_argument("--engine", default=train_default("engine"), help="as `flashgnn train --engine`")
    ps.add_argument("--workers", type=count(1), default=None,
                    help="sampling producer threads (the batches do not depend on it; default: the cores this "
                         "process may use)")
    ps.add_argument("--force", action="store_true", help="replace an existing output directory")
    ps.add_argument("--json", action="store_true", help="print the report as JSON")
    add_quiet(ps)


def _upkeep_parsers(sub) -> None:
    """A dataset's upkeep: `verify`, `scrub` and `compact`."""
    v = sub.add_parser("verify", help="check every checksum, address and bound (and a mutable store's log, read-only)")
    v.add_argument("dataset")
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    add_quiet(v)

    sc = sub.add_parser(
        "scrub",
        help="read every page at a bounded rate (O_DIRECT), check it, report every damaged page (docs/scrub.md); "
        "exit 0 clean, 3 damage found, 2 error",
    )
    sc.add_argument("dataset")
    sc.add_argument("--rate", type=parse_rate, default=parse_rate("100MB/s"),
                    help="read rate, e.g. 100MB/s (default), 1GiB/s; 0 = unlimited")
    sc.add_argument("--resume", action="store_true",
                    help="continue the unfinished pass in the progress file (finished bytes are not read again)")
    sc.add_argument("--state", default=None, help="directory for progress.json (default DATASET/.scrub)")
    sc.add_argument("--json", action="store_true", help="print the report as JSON")
    add_quiet(sc)

    c = sub.add_parser("compact", help="fold a mutable store's log into a new generation (docs/format.md § Mutable store)")
    c.add_argument("dataset")
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    add_quiet(c)


# `flashgnn --help` lists the commands by what a person comes to do, in this order.
COMMAND_GROUPS = (
    ("datasets", ("generate", "build", "info", "verify", "scrub", "compact", "stripe")),
    ("training and inference", ("train", "presample", "embed", "recommend")),
    ("serving", ("serve", "query")),
    ("storage benchmarks and the SSD simulator", ("bench", "trace", "simulate", "plot-trace", "fit-ssd")),
)


class _TopFormatter(argparse.RawDescriptionHelpFormatter, HelpFormatter):
    """The top-level help: the grouped command list (the epilog) keeps its layout."""


def _group_commands(p: argparse.ArgumentParser, sub) -> None:
    """Replace argparse's flat list of commands with :data:`COMMAND_GROUPS`, each command with its one-line
    help (also each command's own ``--help`` description). A command in no group fails here, at once."""
    import textwrap

    helps = {a.dest: a.help for a in sub._choices_actions}
    grouped = [c for _, cmds in COMMAND_GROUPS for c in cmds]
    if sorted(grouped) != sorted(sub.choices):
        raise AssertionError(f"COMMAND_GROUPS {sorted(grouped)} != the commands {sorted(sub.choices)}")
    for name, sp in sub.choices.items():
        if sp.description is None:
            sp.description = helps.get(name)
    sub._choices_actions.clear()  # the flat list; the epilog below replaces it
    sub.metavar = "COMMAND"
    sub.help = "`flashgnn COMMAND --help` shows a command's options, each with its default"
    width = 24
    lines = []
    for title, cmds in COMMAND_GROUPS:
        lines.append(f"{title}:")
        for c in cmds:
            text = textwrap.wrap(helps.get(c) or "", 78 - width)
            lines.append(f"  {c:<{width - 2}}{text[0] if text else ''}")
            lines.extend(" " * width + t for t in text[1:])
        lines.append("")
    p.epilog = "\n".join(lines).rstrip()
    p.formatter_class = _TopFormatter


# Third-party deprecation notices the user can do nothing about: torch_geometric
# scripts a few helpers with torch.jit.script at import, and torch 2.9+ warns on
# every such call. Silenced for the command line only; the library leaves the
# user's warning filters alone.
_QUIET = [(r".*torch\.jit\.script.* is deprecated", FutureWarning)]


def quiet_warnings() -> None:
    """Silence :data:`_QUIET` (command-line programs only: benchmarks' children too)."""
    import warnings

    for message, category in _QUIET:
        warnings.filterwarnings("ignore", message=message, category=category)


def main(argv: list[str] | None = None) -> int:
    quiet_warnings()
    args = _parser().parse_args(argv)
    from flashgnn.cli import commands

    try:
        return getattr(commands, "cmd_" + args.command.replace("-", "_"))(args)
    except (flashgnn.InputError, flashgnn.CorruptDatasetError, flashgnn.DatasetNotFoundError, IndexError) as e:
        print(f"flashgnn {args.command}: error: {e}", file=sys.stderr)
        return 2
    except (ValueError, FileExistsError) as e:
        print(f"flashgnn {args.command}: error: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # e.g. the mutable store is held by another writer (mut/LOCK)
        print(f"flashgnn {args.command}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"flashgnn {args.command}: I/O error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        done = "progress saved; continue with --resume" if args.command == "scrub" else "nothing was published"
        print(f"flashgnn {args.command}: interrupted; {done}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
