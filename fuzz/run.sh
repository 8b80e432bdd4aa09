#!/usr/bin/env bash
# Run every fuzz target (or those named) for FUZZ_SECONDS each and print one
# line per target and a total: executions, coverage (libFuzzer's `cov`
# edges and `ft` features), corpus size, crashes. Exits 1 when any target
# found a crash, leak, timeout or allocation over the limits (the input is
# left under fuzz/artifacts/<target>/). Two kinds of target, both libFuzzer:
# the Rust decoders' (fuzz_targets/*.rs, cargo-fuzz on the nightly toolchain)
# and the Python decoders' (python/*.py, atheris in ../.venv). A kind whose
# tool is missing is skipped with a note (exit 0 if nothing else failed).
#
#   FUZZ_SECONDS  seconds per target (default 20)
#   FUZZ_JOBS     parallel fuzzing processes per target (default 1)
#   FUZZ_RSS_MB   -rss_limit_mb (default 2048)
#   FUZZ_MALLOC_MB -malloc_limit_mb: one allocation larger than this is a finding (default 256)
set -uo pipefail
cd "$(dirname "$0")"
SECONDS_EACH=${FUZZ_SECONDS:-20}
JOBS=${FUZZ_JOBS:-1}
RSS_MB=${FUZZ_RSS_MB:-2048}
MALLOC_MB=${FUZZ_MALLOC_MB:-256}
PY=${FUZZ_PYTHON:-../.venv/bin/python}
have_rust=0; have_py=0
cargo +nightly fuzz --version >/dev/null 2>&1 && have_rust=1
"$PY" -c "import atheris, flashgnn" >/dev/null 2>&1 && have_py=1
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    if [ $have_rust -eq 1 ]; then mapfile -t targets < <(cargo +nightly fuzz list); fi
    for f in python/*.py; do targets+=("$(basename "$f" .py)"); done
fi
[ $have_rust -eq 1 ] || echo "fuzz: Rust targets skipped (needs the nightly toolchain and cargo-fuzz: rustup toolchain install nightly; cargo install cargo-fuzz --locked)"
[ $have_py -eq 1 ] || echo "fuzz: Python targets skipped (needs atheris and flashgnn in $PY: make fuzz installs atheris)"
built=0
par=()
if [ "$JOBS" -gt 1 ]; then par=(-jobs="$JOBS" -workers="$JOBS"); fi
mkdir -p logs
total_execs=0; failed=0; ran=0
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t"
    log="logs/$t.log"
    # -timeout: one input running 10 s is a hang; -max_len: inputs up to 64 KiB
    # (a few pages, a WAL of many frames, a trace of a few blocks).
    flags=(-max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb="$RSS_MB" -malloc_limit_mb="$MALLOC_MB"
           -max_len=65536 "${par[@]}" -print_final_stats=1)
    if [ -f "python/$t.py" ]; then
        [ $have_py -eq 1 ] || continue
        "$PY" "python/$t.py" "corpus/$t" -artifact_prefix="artifacts/$t/" "${flags[@]}" >"$log" 2>&1
    else
        [ $have_rust -eq 1 ] || continue
        if [ $built -eq 0 ]; then
            cargo +nightly fuzz build -O >/dev/null 2>&1 || cargo +nightly fuzz build -O || exit 2
            built=1
        fi
        cargo +nightly fuzz run -O "$t" "corpus/$t" -- "${flags[@]}" >"$log" 2>&1
    fi
    rc=$?
    execs=$(grep -h '^stat::number_of_executed_units' "$log" fuzz-*.log 2>/dev/null | awk '{s+=$2} END {print s+0}')
    last=$(grep -hE '^#[0-9]+' "$log" fuzz-*.log 2>/dev/null | tail -1)
    cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last"); ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
    corp=$(sed -nE 's/.* corp: ([0-9]+).*/\1/p' <<<"$last")
    crashes=$(find "artifacts/$t" -type f | wc -l)
    cat fuzz-*.log >>"$log" 2>/dev/null; rm -f fuzz-*.log
    status=ok
    if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then status="FAILED (rc $rc, see fuzz/$log, fuzz/artifacts/$t/)"; failed=$((failed + 1)); fi
    printf 'fuzz %-14s %5ss  execs %10s  cov %5s  ft %6s  corpus %5s  crashes %s  %s\n' \
        "$t" "$SECONDS_EACH" "$execs" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$crashes" "$status"
    total_execs=$((total_execs + execs)); ran=$((ran + 1))
done
printf 'fuzz total: %d targets run, %d executions, %d failed\n' "$ran" "$total_execs" "$failed"
[ "$failed" -eq 0 ]
