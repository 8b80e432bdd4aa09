"""Write the seed corpora of the fuzz targets (fuzz/corpus/<target>/seed-*)
from real files: the format fixtures under tests/fixtures/, a trace and a
mutable store's log recorded on a copy of one of them with the installed
`flashgnn` (`make develop`), the built-in simulator configs, and small text
inputs of the shapes `build` reads. Each seed is a few KB at most.

The slot, overflow-page and page-header targets read a layout from the
front of their input (fuzz/src/lib.rs `draw_layout`); their seeds carry the
fixture's own layout there, so the fuzzer starts from slots that decode.

Run from the repository root: `python fuzz/make_seeds.py` (make fuzz-seeds).
"""

import gzip
import json
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
FIX = ROOT / "tests" / "fixtures"
F32 = 2  # Dtype::Float32.code()


def put(target: str, name: str, data: bytes) -> None:
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / f"seed-{name}").write_bytes(data)


def layout_prefix(m: dict) -> bytes:
    """draw_layout's non-raw encoding of manifest `m`'s layout."""
    sep = m["features"]["placement"] == "separate"
    has_id = m.get("dataset_id") is not None
    flags = (1 if sep else 0) | (2 if has_id else 0)
    page_code = {512: 0, 1024: 1, 2048: 2, 4096: 3}[m["page_size"]]
    b = struct.pack("<BBHIBBBBI", flags, page_code, m["num_nodes"], m["num_edges"], 0 if m["id_bytes"] == 4 else 1,
                    m["features"]["dim"], F32, m["graph"]["inline_cap"], m["graph"]["overflow_entries"])
    if has_id:
        b += struct.pack("<Q", m["dataset_id"])
    return b


def dataset_seeds(tag: str, ds: Path) -> None:
    m = json.loads((ds / "manifest.json").read_text())
    put("manifest", tag, (ds / "manifest.json").read_bytes())
    page, slot = m["page_size"], m["graph"]["slot_bytes"]
    graph = (ds / "graph.fg").read_bytes()
    pre = layout_prefix(m)
    put("page_headers", f"{tag}-graph", b"\0" + pre + graph[:page])
    put("page_headers", f"{tag}-overflow", b"\1" + pre + (ds / "overflow.fg").read_bytes()[:page])
    if (ds / "features.fg").exists():
        put("page_headers", f"{tag}-features", b"\2" + pre + (ds / "features.fg").read_bytes()[:page])
    per_page = page // slot
    for node in (0, 1, m["num_nodes"] - 1):
        at = page * (1 + node // per_page) + (node % per_page) * slot
        for mode in (0, 1):
            put("slot", f"{tag}-n{node}-m{mode}", pre + bytes([0, mode]) + struct.pack("<I", node) + graph[at:at + slot])
    ovf = (ds / "overflow.fg").read_bytes()
    for no in range(1, min(3, len(ovf) // page)):
        put("overflow_page", f"{tag}-p{no}", pre + b"\0" + struct.pack("<I", no) + ovf[no * page:(no + 1) * page])
    for f in sorted(ds.glob("*.npy"))[:4]:
        put("npy_header", f"{tag}-{f.stem}", f.read_bytes()[:256])


def main() -> int:
    if CORPUS.exists():
        for old in CORPUS.glob("*/seed-*"):
            old.unlink()
    for v in ("format-v1", "format-v2"):
        for kind in ("inline", "separate"):
            dataset_seeds(f"{v[-2:]}-{kind}", FIX / v / kind)

    ps = FIX / "presample-v1" / "ps" / "epoch-0000.fgps"
    rec = ps.read_bytes()
    size = 32 + struct.unpack_from("<I", rec, 24)[0]
    nodes = json.loads((ps.parent / "presample.json").read_text())["dataset"]["num_nodes"]
    put("presample", "v1-first", bytes([0, 0]) + struct.pack("<HI", 0, nodes) + rec[:size])

    cfg = ROOT / "configs" / "ssd"
    for c in sorted(cfg.glob("*.toml")):
        put("sim_config", c.stem, c.read_bytes())
    put("sim_config", "tlc-set", (cfg / "tlc-conventional.toml").read_bytes() + b"\0array.devices=2\n")

    edges = b"# SNAP edge list\n0 1\n1 2\t7\n2,0\r\n3 4\r5 3\n% comment\n"
    for flags, name in ((0, "plain"), (2, "skip"), (4, "bounded")):
        put("text_edges", name, bytes([flags]) + (b"\x10\0" if flags & 4 else b"") + edges)
    put("text_edges", "gz", b"\1" + gzip.compress(edges, mtime=0))
    put("text_labels", "values", b"\0\x10\0" + b"1\n0\nnan\n4\n")
    put("text_labels", "pairs", b"\2\x10\0" + b"# node label\n3 1\n0 2\n7 4\n")
    put("text_labels", "csv", b"\4\x10\0" + b"0.5,1.0,-2e3\n1,2,3\n")
    put("text_labels", "values-gz", b"\1\x10\0" + gzip.compress(b"1\n2\n3\n", mtime=0))

    with tempfile.TemporaryDirectory() as tmp:
        ds = Path(tmp) / "ds"
        shutil.copytree(FIX / "format-v2" / "inline", ds)
        trace = Path(tmp) / "t.fgt"
        subprocess.run(["flashgnn", "trace", str(ds), str(trace), "--batches", "2", "--batch-size", "4",
                        "--fanout", "2,2", "--engine", "pread", "--quiet"], check=True)
        put("trace", "pread-2x4", b"\0" + trace.read_bytes())
        import numpy as np
        from flashgnn.store.graph import MutableGraph
        g = MutableGraph(str(ds))
        v = g.add_vertex(np.ones(8, dtype=np.float32))
        g.add_edge(v, 1)
        g.add_edge(2, v)
        g.delete_edge(2, v)
        g.update_embed(3, np.zeros(8, dtype=np.float32))
        g.delete_vertex(5)
        del g
        m = json.loads((ds / "manifest.json").read_text())
        for log in sorted((ds / "mut").glob("wal-*.log")):
            put("wal", log.stem, bytes([0, 1]) + struct.pack("<Q", m["dataset_id"]) + log.read_bytes())
    dfg_seeds()
    n = sum(1 for _ in CORPUS.glob("*/seed-*"))
    print(f"wrote {n} seeds under {CORPUS.relative_to(ROOT)}")
    return 0


def dfg_seeds() -> None:
    """Serialised DFGs for fuzz/python/dfg_wire.py (first byte 0: sent as they are): a GEMM/ReLU graph and
    the built-in GraphSAGE and GCN graphs as a client sends them to `Run` (BatchPre on the request's
    targets), on 8-wide features."""
    import torch
    from torch_geometric.nn import GCN, GraphSAGE

    import flashgnn.dfg as dfg

    torch.manual_seed(0)
    g = dfg.Graph()
    x = g.create_in("X")
    h = g.create_op("GEMM", [x, g.create_param("W", torch.ones(8, 4)), g.create_param("b", torch.zeros(4))])
    g.create_out("Result", g.create_op("ReLU", [h]))
    put("dfg_wire", "gemm-relu", b"\0" + g.to_bytes())
    put("dfg_wire", "gcn", b"\0" + dfg.models.gcn(GCN(8, 8, 2, 3).eval().state_dict(), [3, 2]).to_bytes())
    put("dfg_wire", "sage", b"\0" + dfg.models.sage(GraphSAGE(8, 8, 2, 3).eval().state_dict(), [3, 2]).to_bytes())


if __name__ == "__main__":
    sys.exit(main())
