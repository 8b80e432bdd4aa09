#!/usr/bin/env bash
# The checks that need a CUDA device, as one script (CI has none; the `gpu`
# tests skip there). Run where a GPU exists, from the repository root, with
# flashgnn's wheel in WHEEL_DIR (built elsewhere by `maturin build --release`;
# the wheel is abi3, so any CPython >= 3.11 takes it):
#
#   WHEEL_DIR=.whl OUT=/tmp/gpu-out bash benchmarks/gpu_check.sh
#
# Every wheel in WHEEL_DIR is installed: add grpcio/protobuf wheels where the
# machine's are older than pyproject.toml asks (the gRPC stubs refuse to load).
# It installs the wheel (no dependencies: the machine's torch, PyG, numpy,
# tqdm and grpcio are used), runs the `gpu`-marked tests and the GPU tier's
# test file, generates a dataset, runs `benchmarks.device_tier` on CUDA
# (batches delivered on the device with and without flashgnn.DeviceCache)
# and one training epoch on CUDA with and without the device cache. Logs and
# JSON land in $OUT; the last line is a one-line summary. FULL=SECONDS also runs
# the whole default suite (pytest-xdist, 12 workers) for at most that long.
set -u -o pipefail
OUT=${OUT:-/tmp/gpu-out}
WHEEL_DIR=${WHEEL_DIR:-.whl}
SCALE=${SCALE:-20}
mkdir -p "$OUT"
fail=0
step() { echo "== $*"; }

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEEL_DIR"/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi -L
python3 -c "import flashgnn, torch, torch_geometric as g, numpy; print('torch', torch.__version__, 'pyg', g.__version__, 'numpy', numpy.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0))" || exit 3

step "pytest: gpu-marked tests and the device tier's file"
python3 -m pytest -q -p no:cacheprovider -o addopts="" -m "not slow and not bench" \
    tests/sample/test_device_cache.py tests/dfg/test_dfg.py "tests/train/test_training.py::test_cuda_device" 2>&1 | tee "$OUT/pytest.log" || fail=1

if [ -z "${ONLY_TESTS:-}" ]; then  # ONLY_TESTS=1: the tests alone
step "dataset (rmat scale $SCALE, 128-dim)"
python3 -m flashgnn generate rmat /tmp/raw --scale "$SCALE" --edge-factor 16 --dim 128 --classes 16 --seed 1 --force >/dev/null || exit 4
python3 -m flashgnn build /tmp/raw /tmp/ds --symmetrize --dedup --force 2>&1 | tail -1 || exit 4

step "device tier on cuda (256 MiB of rows on the device, 128 MiB DRAM cache)"
python3 -m benchmarks.device_tier /tmp/ds --device-budget 256MiB --cache-budget 128MiB --device cuda --batches 30 --json \
    > "$OUT/device_tier.json" 2> "$OUT/device_tier.err" || { fail=1; tail -20 "$OUT/device_tier.err"; }
cat "$OUT/device_tier.json"

for dc in 0 256MiB; do
    step "train on cuda, --device-cache $dc"
    python3 -m flashgnn train /tmp/ds --device cuda --epochs 1 --fanout 10,5 --batch-size 1024 --device-cache "$dc" \
        --no-progress --metrics-json "$OUT/train-dc-$dc.json" 2>&1 | tail -3 || fail=1
done
fi
if [ -n "${FULL:-}" ]; then  # the whole default suite where CUDA exists (tests that branch on it), FULL seconds at most
    step "pytest: the default suite with CUDA present (-n 12, ${FULL} s at most)"
    # -rf names every failure in the summary; SIGINT at the limit still prints it (a plain kill would not),
    # and the log is written as it runs, not through a pipe that dies with it.
    timeout --signal=INT --kill-after=20 "$FULL" python3 -m pytest -q -rf -p no:cacheprovider -n 12 \
        > "$OUT/pytest-full.log" 2>&1 || fail=1
    grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest-full.log" | tail -60
fi
echo "gpu_check: $( [ $fail = 0 ] && echo passed || echo FAILED ) ($(grep -Eo '[0-9]+ passed[^=]*' "$OUT/pytest.log" | tail -1))"
exit $fail
