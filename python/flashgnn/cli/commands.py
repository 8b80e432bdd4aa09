"""Implementations of the CLI subcommands (argument parsing is in __init__)."""

from __future__ import annotations

import sys
from pathlib import Path

import flashgnn
from flashgnn import _core
from flashgnn._util import print_json as _print_json, human_bytes


def cmd_generate(a) -> int:
    if a.model == "igbh":
        return _generate_igbh(a)
    opts = dict(
        scale=a.scale, edge_factor=a.edge_factor, dim=a.dim, dtype=a.dtype, edge_dtype=a.edge_dtype, classes=a.classes,
        seed=a.seed,
        homophily=a.homophily, feature_signal=a.feature_signal, split=a.split, force=a.force,
    )
    rep = flashgnn.generate(a.out, progress=not (a.json or a.quiet), **opts)
    if a.json:
        _print_json(rep)
    else:
        print(
            f"generated {a.out}: {rep['num_nodes']:,} nodes, {rep['num_edges']:,} edges, "
            f"{human_bytes(rep['bytes'])} in {rep['seconds']:.1f} s ({rep['bytes'] / 2**20 / max(rep['seconds'], 1e-9):.0f} MiB/s)"
        )
    return 0


def _generate_igbh(a) -> int:
    if a.out is not None and a.out_flag is not None and a.out != a.out_flag:
        raise flashgnn.InputError(f"generate igbh: two outputs, {a.out} and --out {a.out_flag}; give one")
    out = a.out if a.out is not None else a.out_flag
    if out is None:
        raise flashgnn.InputError("generate igbh: no output directory; give OUT or --out DIR")
    opts = dict(
        model="igbh", scale=a.scale, feature_dim=a.feature_dim, dtype=a.dtype, edge_dtype=a.edge_dtype,
        classes=a.classes, seed=a.seed, homophily=a.homophily, feature_signal=a.feature_signal, labeled=a.labeled,
        split=a.split, venues=a.venues, force=a.force,
    )
    rep = flashgnn.generate(out, progress=not (a.json or a.quiet), **opts)
    if a.json:
        _print_json(rep)
    else:
        print(
            f"generated {out}: {len(rep['node_types'])} node types, {rep['num_nodes']:,} nodes "
            f"({rep['node_types']['paper']:,} papers), {len(rep['edge_types'])} edge types, {rep['num_edges']:,} edges, "
            f"{human_bytes(rep['bytes'])} in {rep['seconds']:.1f} s "
            f"({rep['num_edges'] / max(rep['seconds'], 1e-9):,.0f} edges/s)"
        )
    return 0


def isolated_words(deg: dict) -> str:
    """Isolated nodes (no edge either way) and nodes with no stored neighbor (no in-edge), which differ on a
    directed graph. Manifests written before ``no_neighbors`` existed counted the latter as ``isolated``."""
    if deg.get("no_neighbors") is None:
        return f"{deg['isolated']:,} nodes with no stored neighbor (isolated not counted by this dataset's build)"
    return f"{deg['isolated']:,} isolated nodes (no edge either way), {deg['no_neighbors']:,} with no stored neighbor"


def cmd_build(a) -> int:
    import os

    if os.path.isfile(os.path.join(a.input, _core.MANIFEST_FILE)):
        raise flashgnn.InputError(f"{a.input}: is already a flashgnn dataset (it holds manifest.json), not a raw "
                                  f"input; use it as it is (`flashgnn info {a.input}`, `flashgnn train {a.input}`)")
    opts = {o["name"]: getattr(a, o["name"]) for o in _core.BUILD_OPTIONS}
    if opts["num_classes"] is None:
        del opts["num_classes"]
    elif opts["num_classes"] < 1:
        raise flashgnn.InputError(f"--num-classes {opts['num_classes']} must be in [1, 2147483647] (class ids are "
                                  "32-bit labels in [0, num_classes))")
    rep = flashgnn.build(a.input, a.out, progress=not (a.json or a.quiet), derive_features=a.derive_features, **opts)
    if a.json:
        _print_json(rep)
        return 0
    m = rep["manifest"]
    b = m["build"]
    if a.quiet:
        _built_line(a, m, b)
        return 0
    if rep["skipped_lines"]:
        print(f"skipped {rep['skipped_lines']:,} malformed lines; first examples:", file=sys.stderr)
        for ex in rep["skipped_examples"]:
            print(f"  {ex}", file=sys.stderr)
    for note in rep.get("notes", ()):
        print(f"note: {note}", file=sys.stderr)
    if rep["nan_replaced"]:
        print(f"replaced {rep['nan_replaced']:,} non-finite feature values with 0", file=sys.stderr)
    merged = b.get("reverse_duplicates_removed", 0)
    print(
        f"normalised: {b['input_edges']:,} input edges -> {m['num_edges']:,} stored "
        f"(self-loops dropped {b['self_loops_dropped']:,}, added {b['self_loops_added']:,}; duplicates removed {b['duplicates_removed']:,}"
        + (f"; reverse copies already present {merged:,}" if b["symmetrize"] and b["dedup"] else "")
        + f"); {isolated_words(m['degree'])}"
    )
    note = symmetrize_note(b)
    if note:
        print(note)
    made = b.get("splits_made")
    if made:
        sizes = ", ".join(f"{k} {m['splits'].get(k, 0):,}" for k in ("train", "val", "test"))
        if made == "stratified":
            print(f"splits: stratified by class ({sizes}): each class's labelled nodes are split in the given fractions, "
                  "every class with a labelled node has at least one training node, unlabeled nodes are in no split")
        else:
            print(f"splits: random per node ({sizes}); no labels to stratify by")
    overlap = max(b["preprocess_seconds"], b["feature_seconds"])
    print(
        f"times: graph preprocess {b['preprocess_seconds']:.2f} s, feature write {b['feature_seconds']:.2f} s "
        f"(overlapped; max {overlap:.2f} s), layout {b['layout_seconds']:.2f} s, total {b['total_seconds']:.2f} s; "
        f"peak RSS {human_bytes(b['peak_rss_bytes'])} of budget {human_bytes(b['memory_budget_bytes'])}"
    )
    _built_line(a, m, b)
    return 0


def _built_line(a, m: dict, b: dict) -> None:
    total = sum(f["bytes"] for f in m["files"].values())
    t = m.get("types")
    what = (
        f"{len(t['node_types'])} node types, {len(t['edge_types'])} edge types (flashgnn info lists them)"
        if t
        else f"{m['features']['dim']} x {m['features']['dtype']} features ({m['features']['placement']})"
    )
    print(
        f"built {a.out}: {m['num_nodes']:,} nodes, {m['num_edges']:,} edges, {what}, "
        f"{human_bytes(total)} in {b['total_seconds']:.1f} s"
    )


def symmetrize_note(b: dict) -> str:
    """What --symmetrize met in the input, in words: how many input edges had
    their reverse edge already, and what became of the added copies."""
    if not b.get("symmetrize"):
        return ""
    have, distinct = b.get("input_edges_with_reverse", 0), b.get("input_edges_distinct", 0)
    if not have:
        return ""
    if have == distinct:
        head = (f"input already symmetric: all {distinct:,} distinct input edges (self-loops aside) have their reverse "
                f"edge in the input ({have:,} reverse edges already present)")
    else:
        head = f"{have:,} of {distinct:,} distinct input edges already have their reverse edge in the input"
    if b.get("dedup"):
        return (f"{head}; --symmetrize added a reverse copy of each and --dedup merged those into the edges already "
                f"there ({b.get('reverse_duplicates_removed', 0):,} reverse copies; not counted as duplicates)")
    return (f"{head}; --symmetrize added a reverse copy anyway, so each of those edges is stored twice in each "
            "direction (add --dedup to keep one copy, or leave out --symmetrize)")


def info_dict(ds: flashgnn.Dataset) -> dict:
    m, lay = ds.manifest, ds.layout
    graph_bytes = lay["graph_file_bytes"] + lay["overflow_file_bytes"]
    feat_bytes = ds.num_nodes * lay["row_bytes"]
    csr_struct = lay["csr_structure_bytes"]
    # Structure overhead: our graph files minus the inline feature bytes they carry.
    inline_feat = feat_bytes if m["features"]["placement"] == "inline" else 0
    files_total = sum(f["bytes"] for f in m["files"].values())
    return {
        "path": ds.path,
        "format_version": m["format_version"],
        # Typed datasets of format version 4 carry an edge base per relation in every slot: e_id per edge type.
        "edge_ids": bool(m.get("types")) and m["format_version"] >= 4,
        "num_nodes": ds.num_nodes,
        "num_edges": ds.num_edges,
        "features": m["features"],
        "labels": m["labels"],
        "splits": m["splits"],
        "reorder": m["reorder"],
        "degree": m["degree"],
        "layout": lay,
        "index_bytes_per_node": lay["index_bytes_per_node"],
        "bytes": {
            "files_total": files_total,
            "graph_and_features": lay["stored_bytes"],
            "csr_total": lay["csr_bytes"],
            "csr_structure": csr_struct,
            "structure": graph_bytes - inline_feat,
        },
        "overhead_vs_csr": lay["stored_bytes"] / lay["csr_bytes"] - 1 if lay["csr_bytes"] else 0.0,
        "structure_overhead_vs_csr": (graph_bytes - inline_feat) / csr_struct - 1 if csr_struct else 0.0,
        "build": m["build"],
        # Typed datasets (format version 3 or 4): node and edge types.
        "types": m.get("types"),
    }


def _mutable_info(path) -> dict | None:
    """The mutable store's state (generation, log, delta) when ``path/mut``
    exists; read-only (the log is replayed in memory, nothing is changed)."""
    import os

    if not os.path.lexists(os.path.join(path, _core.MUT_DIR)):
        return None  # (a `mut` that is not a directory is reported: verify_mutable refuses it)
    try:
        return _core.verify_mutable(os.fspath(path))
    except flashgnn.CorruptDatasetError as e:
        return {"error": str(e)}


def _print_types(t: dict) -> None:
    """Per node type: count, features, labels, splits; per edge type: edges."""
    for nt in t["node_types"]:
        f = nt.get("features")
        feat = f"features {f['dim']} x {f['dtype']}" if f else "no features"
        lab = nt.get("labels")
        labs = f"labels {lab['num_classes']} classes, {lab['labeled']:,} labeled" if lab else "no labels"
        splits = ", ".join(f"{k} {v:,}" for k, v in nt.get("splits", {}).items()) or "none"
        print(f"node type    {nt['name']}: {nt['count']:,} nodes; {feat}; {labs}; splits {splits}")
    for et in t["edge_types"]:
        print(f"edge type    ({et['src']}, {et['rel']}, {et['dst']}): {et['num_edges']:,} edges")


def cmd_info(a) -> int:
    mut = _mutable_info(a.dataset)
    # A mutated dataset is described by its current generation's base.
    ds = flashgnn.open(mut["dataset"] if mut and "dataset" in mut else a.dataset)
    d = info_dict(ds)
    if mut is not None:
        d["mutable"] = mut
    if a.json:
        _print_json(d)
        return 0
    deg, lay, by = d["degree"], d["layout"], d["bytes"]
    f = d["features"]
    print(f"dataset      {d['path']}")
    print(f"nodes        {d['num_nodes']:,}    edges (stored, directed) {d['num_edges']:,}    reorder {d['reorder']}")
    if not d.get("types"):
        print(f"features     {f['dim']} x {f['dtype']} ({f['placement']}{', synthetic' if f.get('synthetic') else ''}), row {lay['row_bytes']} B")
    if d["labels"]:
        print(f"labels       {d['labels']['num_classes']} classes, {d['labels']['labeled']:,} labeled")
    if not d.get("types"):
        print("splits       " + (", ".join(f"{k} {v:,}" for k, v in d["splits"].items()) or "none"))
    else:
        _print_types(d["types"])
        print("edge ids     " + ("e_id per edge type (format 4: an 8-B edge base per relation in every slot)"
                                 if d["edge_ids"] else f"none (format {d['format_version']}: batches carry no e_id; "
                                 "a build without --no-edge-ids adds them)"))
    print(
        f"degree       min {deg['min']} / median {deg['median']} / mean {deg['mean']:.2f} / p99 {deg['p99']} / max {deg['max']:,}; "
        f"{isolated_words(deg)}; spilled to overflow {deg['spilled_nodes']:,}"
    )
    print(
        f"layout       page {lay['page_size']} B, slot {lay['slot_bytes']} B x {lay['slots_per_page']}/page, inline cap {lay['inline_cap']}, "
        f"{lay['slot_pages']:,} slot pages + {lay['overflow_pages']:,} overflow pages"
    )
    print(f"index        {d['index_bytes_per_node']} B of in-memory index per node (slot address = arithmetic on the id)")
    print(
        f"size         {human_bytes(by['graph_and_features'])} graph+features vs {human_bytes(by['csr_total'])} plain CSR "
        f"-> overhead {d['overhead_vs_csr'] * 100:+.2f}%; structure alone {human_bytes(by['structure'])} vs "
        f"{human_bytes(by['csr_structure'])} -> {d['structure_overhead_vs_csr'] * 100:+.2f}%; all files {human_bytes(by['files_total'])}"
    )
    if mut is not None and "error" in mut:
        print(f"mutable      error: {mut['error']}")
    elif mut is not None:
        print(
            f"mutable      generation {mut['generation']} (base above: {mut['dataset']}), log {mut['frames']:,} frames / "
            f"{mut['ops']:,} ops, {human_bytes(mut['wal_bytes'])} (seq {mut['base_seq']}..{mut['last_seq']}, torn tail "
            f"{mut['torn_tail_bytes']} B); delta {mut['delta_nodes']:,} nodes, {human_bytes(mut['delta_bytes'])}; "
            f"{mut['num_nodes']:,} nodes now, {mut['free_ids_now']:,} deleted ids"
        )
    return 0


def cmd_verify(a) -> int:
    rep = flashgnn.verify(a.dataset, progress=not (a.json or a.quiet))
    if a.json:
        _print_json(rep)
        return 0
    mut = rep.get("mutable")
    where = f"{a.dataset} (generation {mut['generation']}: {rep.get('dataset', a.dataset)})" if mut else a.dataset
    line = (
        f"verified {where}: {rep['files']} files, {human_bytes(rep['bytes'])}, {rep['slots']:,} slots, "
        f"{rep['overflow_pages']:,} overflow pages, {rep['feature_rows']:,} separate feature rows"
    )
    if mut:
        line += (
            f"; WAL {mut['frames']:,} frames, {mut['ops']:,} ops (seq {mut['base_seq']}..{mut['last_seq']}, "
            f"{human_bytes(mut['wal_bytes'])}), torn tail {mut['torn_tail_bytes']} B, {mut['free_ids']:,} free ids"
        )
        if mut["leftovers"]:
            line += f", {len(mut['leftovers'])} leftovers (removed by the next writable open)"
    print(f"{line}: OK in {rep['seconds']:.1f} s")
    return 0


#: `flashgnn scrub` exit status when damage was found (0: none; 2: could not
#: scrub — missing dataset, foreign or corrupt progress file).
SCRUB_DAMAGE_EXIT = 3


def cmd_scrub(a) -> int:
    import os

    if a.state is not None and os.path.lexists(a.state) and not os.path.isdir(a.state):
        raise flashgnn.InputError(f"--state {a.state}: is not a directory (progress.json is kept in a directory)")
    rep = flashgnn.scrub(a.dataset, rate=a.rate, resume=a.resume, state=a.state, progress=not (a.json or a.quiet))
    bad = rep["damaged_count"]
    if a.json:
        _print_json(rep)
        return SCRUB_DAMAGE_EXIT if bad else 0
    for d in rep["damaged"]:
        at = f"byte offset {d['offset']}" if d["offset"] is not None else "offset unknown"
        idx = f" {d['index']}" if d["index"] is not None else ""
        print(f"DAMAGED {d['file']} at {at}: {d['kind']}{idx}: {d['check']}")
    if bad > len(rep["damaged"]):
        print(f"... and {bad - len(rep['damaged']):,} more damaged (only the first {len(rep['damaged']):,} are kept)")
    mib = 2**20  # the size parser's M is binary: 100MB/s = 100 MiB/s
    target = rep["rate_target_bytes_per_s"]
    rate = f"{rep['rate_achieved_bytes_per_s'] / mib:.1f} MiB/s achieved"
    rate += f" vs {target / mib:.1f} MiB/s rate ({rep['rate_achieved_bytes_per_s'] / target:.2f})" if target else " (unlimited rate)"
    resumed = f", {human_bytes(rep['bytes_skipped'])} done before --resume" if rep["resumed"] else ""
    direct = "" if rep["direct"] else " (buffered: the file system refused O_DIRECT)"
    print(
        f"scrubbed {a.dataset}: {human_bytes(rep['bytes_read'])} read{direct}{resumed}, {rep['files']} files, "
        f"{rep['pages']:,} pages, {rep['feature_rows']:,} feature rows, {bad:,} damaged, {rate} in {rep['seconds']:.1f} s"
    )
    return SCRUB_DAMAGE_EXIT if bad else 0


def cmd_compact(a) -> int:
    import os

    if not os.path.lexists(os.path.join(a.dataset, _core.MUT_DIR)):
        # Opening it would make a mutable store (and compacting it, a full copy of the dataset) with nothing
        # to fold: refused before anything is written.
        flashgnn.open(a.dataset)  # a missing or raw directory gets the store's own error and advice
        raise flashgnn.InputError(f"{a.dataset}: no mutable store ({os.path.join(a.dataset, _core.MUT_DIR)} does not exist): "
                                  "nothing to compact; a dataset gets one when it is first changed "
                                  "(flashgnn.MutableGraph, or `flashgnn serve` with UpdateGraph)")
    g = flashgnn.MutableGraph(a.dataset)
    try:
        before = g.generation
        rep = g.compact(progress=not (a.json or a.quiet))
    finally:
        g.close()
    if a.json:
        _print_json(rep)
        return 0
    print(
        f"compacted {a.dataset}: generation {before} -> {rep['generation']}, {rep['num_nodes']:,} nodes, "
        f"{rep['num_edges']:,} edges; folded {rep['folded_frames']:,} batches / {rep['folded_ops']:,} delta ops "
        f"({human_bytes(rep['folded_wal_bytes'])} of log, {rep['delta_nodes']:,} touched nodes) in "
        f"{rep['seconds']:.1f} s (export {rep['export_seconds']:.1f} s, build {rep['build_seconds']:.1f} s); "
        f"new base {human_bytes(rep['bytes'])}"
    )
    return 0




def cmd_train(a) -> int:
    # A TrainError (a ValueError) comes back as `flashgnn train: error: ...`, exit 2 (see main).
    from flashgnn.train import TrainConfig, Trainer

    Trainer(TrainConfig.from_namespace(a)).fit()
    return 0


def _check_engine(engine: str) -> None:
    """``--engine`` of embed and presample: auto or an engine name, checked before torch loads."""
    from flashgnn.sample.sampler import ENGINE_CHOICES

    if engine not in ENGINE_CHOICES:
        raise flashgnn.InputError(f"--engine {engine!r}: expected one of {', '.join(ENGINE_CHOICES)}")


def _torch_device(text: str) -> bool:
    """Whether torch reads ``text`` as a device (xpu, mps, ...: what `flashgnn train --device` and embed took
    before the cpu/cuda fast path above refused the rest). Imports torch: only for a name that path refused."""
    import torch

    try:
        torch.device(text)
    except (RuntimeError, ValueError):
        return False
    return True


def cmd_recommend(a) -> int:
    from flashgnn.recommend import recommend

    if a.k < 1:  # before anything is read
        raise ValueError(f"--k {a.k}: must be >= 1")
    r = recommend(a.dataset, a.out, checkpoint=a.checkpoint, embeddings=a.embeddings, k=a.k,
                  exclude_seen=a.exclude_seen, nodes=a.nodes, candidates=a.candidates, index=a.index,
                  faiss_index=a.faiss_index, faiss_params=a.faiss_params, recall_sample=a.recall_sample,
                  memory_budget=a.memory_budget, query_block=a.query_block, candidate_block=a.candidate_block,
                  force=a.force, progress=not (a.json or a.quiet), quiet=a.quiet or a.json)
    r.pop("ids", None), r.pop("scores", None)
    if a.json:
        _print_json(r)
        return 0
    lo, hi = r["candidates"]
    how = r["index"] + (", mlp decoder" if r.get("decoder") == "mlp" else "") + (", exclude-seen" if r["exclude_seen"] else "")
    recall = (f", recall@{r['k']} {r['recall_at_k']:.3f} vs exact on {r['recall_sample']:,} queries"
              if "recall_at_k" in r else "")
    if r.get("norm_order"):
        recall += f", {r['pairs_scored'] / max(r['pairs_total'], 1):.1%} of the pairs scored (norm order)"
    print(f"recommended top-{r['k']} of {hi - lo:,} candidates for {r['num_queries']:,} queries ({how}) in "
          f"{r['search_s']:.1f} s ({r['queries_per_s']:,.0f} queries/s; blocks {r['query_block']:,} x "
          f"{r['candidate_block']:,}, memory bound {human_bytes(r['memory_bound'])} of --memory-budget "
          f"{human_bytes(r['memory_budget'])}){recall}" + (f" -> {a.out}" if a.out else ""))
    return 0


def cmd_embed(a) -> int:
    import os

    import re

    from flashgnn._durable import check_output

    # Flags, then the dataset and the checkpoint, then the output: before torch loads or anything is written.
    _check_engine(a.engine)
    if not re.fullmatch(r"cpu|cuda(:\d+)?", a.device) and not _torch_device(a.device):
        raise flashgnn.InputError(f"--device {a.device!r}: expected cpu, cuda or cuda:N")
    flashgnn.open(a.dataset)  # a missing dataset, or a raw input (advice: `flashgnn build`)
    if not os.path.exists(a.checkpoint):
        raise flashgnn.InputError(f"--checkpoint {a.checkpoint}: does not exist, so there is no checkpoint to load (a "
                                  "directory written by `flashgnn train --checkpoint DIR`, or with --model-class a "
                                  "torch.save(state_dict) file)")
    if os.path.isdir(a.checkpoint) and a.model_class is None and not os.path.exists(
            os.path.join(a.checkpoint, "checkpoint.pt")):
        raise flashgnn.InputError(f"--checkpoint {a.checkpoint}: holds no checkpoint.pt (train with "
                                  f"`flashgnn train {a.dataset} --checkpoint {a.checkpoint}` first)")
    check_output(a.out, a.force, (a.dataset, a.checkpoint))  # refuse before importing torch
    from flashgnn.nn.usermodel import parse_kwargs

    if a.model_kwargs is not None and a.model_class is None:
        raise ValueError("--model-kwargs needs --model-class (a flashgnn checkpoint records its own model)")
    kwargs = parse_kwargs(a.model_kwargs)  # before any I/O: a JSON typo is reported at once
    from flashgnn.embed import embed

    m = embed(a.dataset, a.checkpoint, a.out, batch_size=a.batch_size, output=a.output, engine=a.engine,
              device=a.device, force=a.force, progress=not (a.json or a.quiet), model_class=a.model_class,
              model_kwargs=kwargs, memory_budget=a.memory_budget, quiet=a.quiet or a.json)
    if a.json:
        _print_json(m)
    elif m.get("typed"):
        per = ", ".join(f"{t} {v['num_nodes']:,} x {v['dim']}" for t, v in m["node_types"].items())
        print(f"embedded {per} ({m['model']}, {m['layers']} layer passes, {m['reads']:,} reads) in "
              f"{m['seconds']:.1f} s -> {a.out}")
    else:
        print(f"embedded {m['num_nodes']:,} nodes x {m['dim']} ({m['model']}, {m['layers']} layer passes, "
              f"{m['reads']:,} reads) in {m['seconds']:.1f} s -> {a.out}")
    return 0


def cmd_bench(a) -> int:
    from flashgnn.ssd.bench import main_bench
    from flashgnn.train.config import parse_fanout

    parse_fanout(a.fanout)  # before any timed run: hops >= 1 or -1, as `flashgnn train --fanout`

    return main_bench(a)  # an InputError (e.g. uring+cache without a budget) exits 2 through main


def cmd_stripe(a) -> int:
    from flashgnn.store.stripe import stripe

    try:
        r = stripe(a.dataset, a.dirs, a.chunk, progress=not a.quiet)
    except (ValueError, FileNotFoundError) as e:
        raise flashgnn.InputError(str(e)) from None
    print(f"striped {a.dataset}: {', '.join(r['files'])} ({human_bytes(r['bytes'])}) over {r['parts']} directories in "
          f"{human_bytes(r['chunk_bytes'])} chunks")
    return 0


def cmd_serve(a) -> int:
    from flashgnn.serve.cli import cmd_serve as serve

    return serve(a)


def cmd_query(a) -> int:
    from flashgnn.serve.cli import cmd_query as query

    return query(a)


def cmd_presample(a) -> int:
    from flashgnn._durable import check_output
    from flashgnn.train.config import parse_fanout

    # Flags, then the dataset, then the output; all before torch loads or anything is written.
    fanouts = parse_fanout(a.fanout)
    _check_engine(a.engine)
    ds = flashgnn.open(a.dataset)
    if a.split not in ds.split_names:
        raise flashgnn.InputError(f"--split {a.split!r}: {ds.path} has no such split (it has: "
                                  f"{', '.join(ds.split_names) or 'none'})")
    check_output(a.out, a.force, (a.dataset,))
    from flashgnn._util import human_bytes
    from flashgnn.loader.presample import presample
    from flashgnn.sample.budget import cpu_cores

    workers = a.workers or cpu_cores()
    r = presample(a.dataset, a.out, fanouts, batch_size=a.batch_size, epochs=a.epochs, seed=a.seed, split=a.split,
                  engine=a.engine, workers=workers, force=a.force, progress=not (a.json or a.quiet))
    if a.json:
        _print_json(r)
    else:
        print(f"presampled {a.epochs} epochs of {a.split!r} into {r['out']}: {human_bytes(r['bytes'])} "
              f"({human_bytes(r['bytes_per_epoch'])} per epoch, {100 * r['bytes_per_epoch'] / r['dataset_bytes']:.1f}% "
              f"of the dataset's {human_bytes(r['dataset_bytes'])}), {r['seconds_per_epoch']:.1f} s per epoch")
    return 0


def cmd_trace(a) -> int:
    from flashgnn.ssd.simulate import batch_size_path, check_trace_output, parse_batch_sizes, record_trace

    try:
        sizes = parse_batch_sizes(a.batch_size)
    except ValueError as e:
        raise flashgnn.InputError(str(e)) from None
    from flashgnn.train.config import parse_fanout

    fanouts = parse_fanout(a.fanout)  # as `flashgnn train --fanout`: hops >= 1 or -1
    type_fanouts = None
    if a.type_fanouts:  # as `flashgnn train --type-fanouts`: SRC__REL__DST=F1,F2 entries
        from flashgnn.train.config import parse_type_fanouts

        type_fanouts = parse_type_fanouts(a.type_fanouts, len(fanouts))
    # One size: OUT itself; several: one trace per size beside it (OUT.bsN), all checked before any work.
    outs = [a.out] if len(sizes) == 1 else [str(batch_size_path(a.out, b)) for b in sizes]
    for o in outs:
        check_trace_output(o, a.force)
    rs = []
    for bs, o in zip(sizes, outs):
        r = record_trace(a.dataset, o, fanouts, bs, a.batches, engine=a.engine, depth=a.depth, seed=a.seed,
                         progress=not (a.json or a.quiet), force=a.force, type_fanouts=type_fanouts)
        r["batch_size"] = bs
        rs.append(r)
        if not a.json:
            print(f"traced {r['batches']} batches of {bs}, {r['records']} reads ({human_bytes(r['bytes_read'])}) on "
                  f"{r['engine']} in {r['seconds']:.2f} s -> {o} ({human_bytes(r['trace_bytes'])})")
    if a.json:
        _print_json(rs[0] if len(rs) == 1 else {"traces": rs})
    return 0


def _plots_or_error():
    from flashgnn.ssd import plots

    try:
        plots.require()
    except ImportError as e:
        raise flashgnn.InputError(str(e)) from None
    return plots


def cmd_simulate(a) -> int:
    import json

    from flashgnn.ssd.simulate import format_report, measured_in_flight, simulate

    plots = _plots_or_error() if a.plots else None  # before any simulation
    r = simulate(a.trace, a.config, a.design, a.sweep, timing=not a.no_timing)
    if plots is not None:
        # The engine's measured reads in flight, per replayed trace (one per run of a batch-size sweep).
        if any("trace" in run for run in r["runs"]):
            measured = [(plots.run_suffix(r, run), measured_in_flight(run["trace"])) for run in r["runs"]]
        else:
            measured = [("", measured_in_flight(a.trace))]
        r["plots"] = plots.simulate_plots(r, a.plots, measured)
    if a.json:
        print(json.dumps(r, indent=2))
    else:
        print(format_report(r))
        if plots is not None:
            print(f"plots ({len(r['plots'])}) in {a.plots}: " + ", ".join(Path(p).name for p in r["plots"]))
    return 0


def cmd_plot_trace(a) -> int:
    from flashgnn.ssd.simulate import measured_in_flight

    plots = _plots_or_error()
    m = measured_in_flight(a.trace)
    if not m["batches"]:
        raise flashgnn.InputError(f"{a.trace}: no read carries submit/complete times (recorded on an engine "
                                  "without timestamps?); nothing to plot")
    m["plots"] = plots.trace_plots(m, a.plots)
    if a.json:
        _print_json({k: v for k, v in m.items() if k not in ("t_s", "reads_in_flight")})
    else:
        print(f"{a.trace}: {m['batches']} batches, {m['reads']} reads, {m['batch_latency_s'] * 1e3:.3f} ms of I/O per "
              f"batch, {m['mean_reads_in_flight']:.1f} reads in flight on average (max {m['max_reads_in_flight']}) "
              f"-> {', '.join(m['plots'])}")
    return 0


def cmd_fit_ssd(a) -> int:
    import os
    import stat

    from flashgnn._durable import fsync_path, kind_of, replace_durably
    from flashgnn.ssd.simulate import depth_path, fit_this_machine, parse_batch_sizes

    try:
        depths = parse_batch_sizes(a.depth)
    except ValueError:
        raise flashgnn.InputError(f"--depth {a.depth!r}: expected distinct integers >= 1 (e.g. 256 or 64,128,256)") from None
    outs = [Path(a.out)] if len(depths) == 1 else [depth_path(a.out, d) for d in depths]
    for out in outs:  # all refused before the probe runs
        if os.path.lexists(out):
            st = os.lstat(out)
            if not stat.S_ISREG(st.st_mode):
                raise FileExistsError(f"{out}: is {kind_of(st.st_mode)}; fit-ssd replaces only a config file (refused)")
            if not a.force:
                raise FileExistsError(f"{out}: already exists; pass --force to replace it")
    base = a.base or "beacongnn-table2"  # built in (flashgnn_sim::config::BUILTIN): no repository needed
    dataset = a.dataset
    if dataset is None and (Path(a.file).resolve().parent / _core.MANIFEST_FILE).is_file():
        dataset = str(Path(a.file).resolve().parent)
    texts, probe = fit_this_machine(a.file, base, depths, a.seconds, dataset=dataset)
    for out, text in zip(outs, texts):
        # Written beside OUT under this process's name, fsynced, renamed: never half a config at OUT.
        tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
        try:
            tmp.write_text(text)
            fsync_path(tmp)
            replace_durably(tmp, out)
        finally:
            tmp.unlink(missing_ok=True)
    cpu = probe["host_cpu"]
    deep = ", ".join(f"QD{d} {v:.0f}" for d, v in probe["iops_by_depth"].items())
    print(f"fitted {', '.join(map(str, outs))}: QD1 {probe['iops_qd1']:.0f} IOPS, {deep} IOPS"
          + (f", host CPU {cpu['ns_per_node']:.0f} ns per sampled node ({cpu['ns_per_read']:.0f} ns per read)"
             if cpu else ", host CPU from the base config (no dataset)"))
    return 0
