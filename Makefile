# flashgnn: two commands on a fresh machine — `make demo` and `make test`.
# Everything else here is what those two call, plus `make bench*`.

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
CARGO ?= cargo
DATA ?= data
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: soak crash-states fuzz fuzz-seeds bench-hetero bench-hetero-accuracy bench-link bench-link-accuracy bench-peers bench-sample-cpu bench-scale bench-defaults bench-sim bench-sim-machine bench-stripe setup develop demo test test-rust test-python test-slow bench bench-build bench-train bench-trainer bench-accuracy bench-e2e bench-device bench-scrub bench-inference clean fmt

# requirements-dev.txt includes the optional extras the tests exercise (train, plots: matplotlib).
$(VENV)/.stamp: pyproject.toml requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

setup: $(VENV)/.stamp

# Release build of the extension into the venv (maturin develop).
develop: setup
	VIRTUAL_ENV=$(CURDIR)/$(VENV) $(VENV)/bin/maturin develop --release --quiet

demo: develop
	$(PY) -m benchmarks.demo --data $(DATA)

test: develop test-rust test-python

test-rust:
	$(CARGO) test --workspace --exclude flashgnn-python --quiet

test-python: develop
	$(PY) -m pytest -q

test-slow: develop
	$(PY) -m pytest -q -m slow

# Power-loss crash states of every update protocol (docs/reliability.md § Power-loss crash states):
# each run recorded under strace, every distinct state of the ext4 and per-directory models checked;
# one line per protocol and a summary. JSON=out.json writes the figures, SEED=n draws another sample.
crash-states: develop
	$(PY) tests/store/crash_protocols.py --long --seed $${SEED:-1} $${JSON:+--json $$JSON}

# libFuzzer over every decoder of untrusted bytes (docs/reliability.md § Fuzzing): FUZZ_SECONDS
# per target (default 20), one summary line per target and a total. The Rust targets need nightly +
# cargo-fuzz (skipped with a note otherwise); the Python one (the DFG from the wire) runs under atheris,
# installed here into the venv (not a `make test` dependency). Not part of `make test`.
# `make fuzz T=wal` runs one target.
fuzz: develop
	$(PY) -c "import atheris" 2>/dev/null || $(PY) -m pip install --quiet "atheris>=2.3"
	FUZZ_SECONDS=$${FUZZ_SECONDS:-20} fuzz/run.sh $(T)

# Rewrite fuzz/corpus/*/seed-* from the fixtures and a trace and WAL recorded with `flashgnn`.
fuzz-seeds: develop
	$(PY) fuzz/make_seeds.py

bench: develop bench-build bench-train bench-trainer bench-accuracy bench-e2e bench-device bench-peers bench-inference

# Scrubber: achieved/target read rate, and serving p50/p99 with and without --scrub-rate (docs/scrub.md).
bench-scrub: develop
	$(PY) -m benchmarks.scrub --scale $${SCALE:-16} --scrub-rate $${RATE:-50MB/s} $${JSON:+--json}

# Out-of-core build benchmark: raw input >= 4x --memory-budget (see docs/benchmarks.md).
bench-build: develop
	$(PY) -m benchmarks.build_ooc --data $(DATA)/bench --budget $${BUDGET:-2GiB} --factor $${FACTOR:-4} $${JSON:+--json $$JSON}

# At scale: >= 1e9 stored edges by default, dataset > RAM when the disk allows
# (refuses with the numbers when it does not); EDGES=1e8 for a reduced run; TASK=link trains link
# prediction on a link split drawn by the build (then node classification on the same dataset).
bench-scale: develop
	$(PY) -m benchmarks.scale --data $(DATA)/scale --baseline $(DATA)/ooc --edges $${EDGES:-1e9} --memory-limit $${LIMIT:-3GiB} --task $${TASK:-node} $${JSON:+--json $$JSON}

# Out-of-core dataset shared by the engine and training benchmarks (1.4 GiB).
$(DATA)/ooc/manifest.json: | setup
	$(MAKE) develop
	$(VENV)/bin/flashgnn generate rmat $(DATA)/ooc-raw --scale 21 --edge-factor 16 --dim 128 --classes 16 --seed 1 --force
	$(VENV)/bin/flashgnn build $(DATA)/ooc-raw $(DATA)/ooc --symmetrize --dedup --force

# Training speed per engine under a memory cap (see docs/training.md).
# The demo dataset (`make demo` builds the same one).
$(DATA)/demo/manifest.json: | setup
	$(VENV)/bin/flashgnn generate rmat $(DATA)/demo-raw --scale 19 --edge-factor 16 --dim 128 --classes 16 --seed 1 --force
	$(VENV)/bin/flashgnn build $(DATA)/demo-raw $(DATA)/demo --symmetrize --dedup --force

# Default `flashgnn train` (--memory-budget auto) vs the best-known flags and vs no cache, same cap, one run.
bench-defaults: develop $(DATA)/demo/manifest.json $(DATA)/ooc/manifest.json
	$(PY) -m benchmarks.defaults $(DATA)/demo $(DATA)/ooc --memory-limit $${LIMIT:-1536MiB} $${JSON:+--json}

# flashgnn beside PyG's own NeighborLoader (benchmarks/peers.py, run from the repo root). PyG samples with
# torch-sparse, built for the installed torch, so it gets its own virtualenv outside the default test path:
# .venv-peers sees .venv's packages (torch, PyG, flashgnn) through a .pth file that adds .venv's
# site-packages as a site dir, and holds only torch-scatter/torch-sparse (and scipy). PEERS_WHEELS=DIR
# installs wheels built beforehand; without it pip builds them from their PyPI sources (~25 min on 2 cores).
PEERS_VENV ?= .venv-peers
$(PEERS_VENV)/.stamp: | setup
	$(PY) -m venv $(PEERS_VENV)
	echo "import site; site.addsitedir('$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')')" \
	  > "$$($(PEERS_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/flashgnn-venv.pth"
	# --no-build-isolation builds against .venv's torch, so the build tools must be here already
	# (a fresh venv has no `wheel`: "invalid command 'bdist_wheel'").
	$(PEERS_VENV)/bin/pip install --quiet wheel setuptools
	if [ -n "$$PEERS_WHEELS" ]; then \
	  $(PEERS_VENV)/bin/pip install --quiet --no-build-isolation --find-links "$$PEERS_WHEELS" torch-scatter torch-sparse; \
	else \
	  echo "bench-peers: building torch-scatter and torch-sparse from their PyPI sources (about 25 minutes on 2 cores)"; \
	  $(PEERS_VENV)/bin/pip install --no-build-isolation torch-scatter torch-sparse; \
	fi
	touch $@

bench-peers: develop $(PEERS_VENV)/.stamp $(DATA)/ooc/manifest.json
	$(PEERS_VENV)/bin/python -m benchmarks.peers --dataset $(DATA)/ooc --memory-limit $${LIMIT:-768MiB} \
	  --batches $${BATCHES:-20} --rounds $${ROUNDS:-3} --scaling $${TRAIN_BATCHES:+--train-batches $$TRAIN_BATCHES} \
	  $${JSON:+--json}
	# A tenth of the data cached (data/ooc's 1.3 GiB): rows held int8 and int4 against PyG in memory.
	$(PEERS_VENV)/bin/python -m benchmarks.peers --dataset $(DATA)/ooc --memory-limit $${LIMIT:-768MiB} \
	  --cache-budget 140MiB --only pyg-memory,uring+cache --row-codecs int8,int4 --batches $${BATCHES:-20} \
	  --rounds $${ROUNDS:-3} --train-batches 0 $${JSON:+--json}

# CPU per batch of the sampler alone, flashgnn against torch_sparse's kernel + gather:
# the memory engine, then uring with a cache of a third of the data.
bench-sample-cpu: develop $(PEERS_VENV)/.stamp $(DATA)/ooc/manifest.json
	$(PEERS_VENV)/bin/python -m benchmarks.sample_cpu --dataset $(DATA)/ooc $${JSON:+--json}
	$(PEERS_VENV)/bin/python -m benchmarks.sample_cpu --dataset $(DATA)/ooc --cached --warmup 10 $${JSON:+--json}

bench-train: develop $(DATA)/ooc/manifest.json
	$(PY) -m benchmarks.train $(DATA)/ooc --memory-limit $${LIMIT:-1536MiB} --batches $${BATCHES:-10} $${JSON:+--json}

# The trainer's own cost: `flashgnn train` against a bare PyG loop over the same loader, model and data, rounds
# alternated; ratio per round and median (target <= 1.05; docs/benchmarks.md). Builds $(DATA)/trainer if missing.
bench-trainer: develop
	$(PY) -m benchmarks.trainer_overhead --dataset $(DATA)/trainer --scale $${SCALE:-19} --rounds $${ROUNDS:-3} --batches $${BATCHES:-30} $${JSON:+--json}

# End-to-end inference latency (HolisticGNN's metric): raw input on disk -> first GCN result, PyG's in-memory
# path vs the store, each stage a fresh process under the cap (see docs/benchmarks.md).
bench-e2e: develop $(DATA)/ooc/manifest.json
	$(PY) -m benchmarks.e2e $(DATA)/ooc-raw --work $(DATA)/ooc-e2e --memory-limit $${LIMIT:-1536MiB} --baseline-uncapped $${JSON:+--json}

# GPU tier: batches delivered on the device with and without flashgnn.DeviceCache
# (exits 0 with a notice where there is no CUDA device).
bench-device: develop $(DATA)/ooc/manifest.json
	$(PY) -m benchmarks.device_tier $(DATA)/ooc --device-budget $${DEVICE_BUDGET:-256MiB} $${JSON:+--json}

# Typed (heterogeneous) sampling: an IGBH-shaped graph (generate igbh, build --add-reverse), flashgnn's typed
# loader (memory; uring, uring+cache[+fp16|+int8] under the cap) against PyG's hetero NeighborLoader (torch-sparse) in memory
# and over mmap. Needs .venv-peers for PyG's sampler.
bench-hetero: develop $(PEERS_VENV)/.stamp
	$(PEERS_VENV)/bin/python -m benchmarks.hetero --scale $${SCALE:-1350000} --memory-limit $${LIMIT:-1.8GiB} \
	  --rounds $${ROUNDS:-3} --batches $${BATCHES:-20} $${JSON:+--json}

# Typed accuracy: flashgnn train --model sage on an IGBH-shaped typed dataset vs PyG's to_hetero(GraphSAGE)
# recipe (hetero NeighborLoader, torch-sparse) on the same graph in memory; target within 1 point.
bench-hetero-accuracy: develop $(PEERS_VENV)/.stamp
	$(PEERS_VENV)/bin/python -m benchmarks.hetero_accuracy --epochs $${EPOCHS:-3} $${JSON:+--json}

# Link-prediction batches: flashgnn.LinkNeighborLoader (memory; uring and uring+cache under a cap the dataset is
# >= 1.5x of, cache <= a third of the data) vs PyG's LinkNeighborLoader (torch-sparse) in memory and over tuned mmap;
# binary negatives, batch 512 edges, fanout 10,5, one thread each, rounds alternated (docs/benchmarks.md, Link batches).
# The R-MAT scale-22 input, its dataset and PyG's arrays (about 9 GB) are kept in WORK and reused.
bench-link: develop $(PEERS_VENV)/.stamp
	$(PEERS_VENV)/bin/python -m benchmarks.link --work $${WORK:-/tmp/flashgnn-link} --scale $${SCALE:-22} \
	  $${LIMIT:+--memory-limit $$LIMIT} --rounds $${ROUNDS:-3} --batches $${BATCHES:-20} $${JSON:+--json}

# A server under load for MINUTES (default 10): reads, durable writes and Run with background scrub, one
# unreadable page of graph.fg, and the file system (a loop-mounted ext4 image: root) filled and freed; prints
# requests, errors, p99 per phase, lost writes (0), server RSS drift (docs/reliability.md, Soak).
soak: develop
	$(PY) -m benchmarks.soak --minutes $${MINUTES:-10} $${JSON:+--json}

# Link prediction: `flashgnn train --task link` vs PyG's LinkNeighborLoader recipe (torch-sparse), test ROC-AUC.
bench-link-accuracy: develop $(PEERS_VENV)/.stamp
	$(PEERS_VENV)/bin/python -m benchmarks.link_accuracy --epochs $${EPOCHS:-5} --model $${MODEL:-sage} $${TYPED:+--typed} $${JSON:+--json}

# Layer-wise inference: flashgnn.inference / model.inference(flashgnn loader) vs PyG's whole graph in memory.
bench-inference: develop $(PEERS_VENV)/.stamp
	test -f $(DATA)/infer/manifest.json || ( $(VENV)/bin/flashgnn generate rmat $(DATA)/infer-raw --scale $${SCALE:-17} --edge-factor 16 --dim 128 --classes 8 --seed 2 --force && $(VENV)/bin/flashgnn build $(DATA)/infer-raw $(DATA)/infer --symmetrize --dedup --self-loops drop --force )
	$(PEERS_VENV)/bin/python -m benchmarks.inference $(DATA)/infer --batch-size $${BATCH:-16384} --rounds $${ROUNDS:-3} $${JSON:+--json}

# Accuracy: GraphSAGE (uring, memory, stock PyG NodeLoader) vs an MLP on features alone.
# SSD design simulator tables (docs/simulator.md): a paper-shaped workload
# (3 hops of fanout 3, 128 x fp16) under BeaconGNN's Table II and the TLC
# drive, a channel sweep, and this machine fitted from the probe alone.
bench-sim: develop
	$(VENV)/bin/flashgnn generate rmat $(DATA)/sim-raw --scale 16 --edge-factor 100 --dim 128 --dtype float16 --seed 1 --force
	$(VENV)/bin/flashgnn build $(DATA)/sim-raw $(DATA)/sim --symmetrize --dedup --force
	$(VENV)/bin/flashgnn trace $(DATA)/sim $(DATA)/sim.fgt --fanout 3,3,3 --batch-size 1024 --batches 10 --force
	$(VENV)/bin/flashgnn simulate $(DATA)/sim.fgt --config configs/ssd/beacongnn-table2.toml --design all
	$(VENV)/bin/flashgnn simulate $(DATA)/sim.fgt --config configs/ssd/beacongnn-table2.toml --design cc --sweep host.block_queue_depth=8,32,256
	$(VENV)/bin/flashgnn simulate $(DATA)/sim.fgt --config configs/ssd/beacongnn-table2.toml --design cc,bg-1,bg-dg,bg-sp,bg-dgsp,bg-2 --sweep tr=3000,20000
	$(VENV)/bin/flashgnn simulate $(DATA)/sim.fgt --config configs/ssd/beacongnn-table2.toml --design host,bg-1,bg-2 --sweep flash.multi_plane=false,true
	$(VENV)/bin/flashgnn simulate $(DATA)/sim.fgt --config configs/ssd/tlc-conventional.toml --design all
	$(VENV)/bin/flashgnn simulate $(DATA)/sim.fgt --config configs/ssd/beacongnn-table2.toml --design host,bg-2 --sweep channels=4,8,16,32
	$(VENV)/bin/flashgnn fit-ssd $(DATA)/sim/graph.fg $(DATA)/this-machine.toml --force
	$(VENV)/bin/flashgnn simulate $(DATA)/sim.fgt --config $(DATA)/this-machine.toml --design host
	$(VENV)/bin/flashgnn simulate $(DATA)/sim.fgt --config configs/ssd/beacongnn-table2.toml --design all --plots $(DATA)/sim-plots

# The simulator against this machine (docs/simulator.md): four settings, each fitted from the probe alone just
# before and after its trace; sim/traced per setting over ROUNDS rounds.
bench-sim-machine: develop
	test -f $(DATA)/sim/manifest.json || $(MAKE) bench-sim
	$(PY) -m benchmarks.sim_machine $(DATA)/sim --work $(DATA)/sim-machine --rounds $${ROUNDS:-3} $${JSON:+--json}

# Striping over 1, 2, 4 directories (docs/benchmarks.md "Striping"): identical batches and batches/s here
# (on one disk: correctness only), and the simulator's prediction for 1-16 separate SSDs. Uses $(DATA)/ooc
# read-only (striped copies, removed after) if present, else generates a small dataset.
bench-stripe: develop
	$(PY) -m benchmarks.stripe $$(test -f $(DATA)/ooc/manifest.json && echo --dataset $(DATA)/ooc) --work $(DATA)/stripe $${JSON:+--json}

bench-accuracy: develop
	test -f $(DATA)/acc/manifest.json || ( $(VENV)/bin/flashgnn generate rmat $(DATA)/acc-raw --scale 16 --edge-factor 16 --dim 64 --classes 8 --seed 2 --split 0.3,0.1,0.6 --force && $(VENV)/bin/flashgnn build $(DATA)/acc-raw $(DATA)/acc --symmetrize --dedup --force )
	$(PY) -m benchmarks.accuracy $(DATA)/acc --epochs $${EPOCHS:-5} $${JSON:+--json}

fmt:
	$(CARGO) fmt --all

clean:
	rm -rf target $(VENV) $(PEERS_VENV) $(DATA)
