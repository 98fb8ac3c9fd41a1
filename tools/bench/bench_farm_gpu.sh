#!/usr/bin/env bash
# tools/bench/bench_farm_gpu.sh -- the whole farm's evaluation rate on GPUs,
# two builds side by side in one run: for each BUILD_DIR, the tune phase of
# tools/gpu-farm-check (a private PostgreSQL from the carried bundle, the
# coordinator, one worker per GPU and a cpu worker, a tune campaign on every
# built-in CUDA task), then one table: jobs finished, the phase's window,
# evaluations per GPU-hour through the farm, and the GPU idle share.
#
#   OUT=DIR tools/bench/bench_farm_gpu.sh PG_BUNDLE BUILD_DIR [BUILD_DIR...]
#   GFC_TUNE_MAX=9      tune candidates per task (default 9: 54 candidates)
#
# Run through the device tool (builds made here: see docs/gpu-validation.md).
# Compare builds only within one run: hosts differ by up to ~25%.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
BUNDLE=${1:?usage: bench_farm_gpu.sh PG_BUNDLE BUILD_DIR [BUILD_DIR...]}
shift
OUT=${OUT:-$PWD/bench-farm-gpu-out}
mkdir -p "$OUT"
export GFC_TUNE_MAX=${GFC_TUNE_MAX:-9}
rows=()
for b in "$@"; do
  name=$(basename "$b")
  t0=$SECONDS
  OUT="$OUT/$name" GFC_PHASES=tune "$here/tools/gpu-farm-check" "$b" "$BUNDLE" >"$OUT/$name.log" 2>&1
  rc=$?
  r="$OUT/$name/rows.txt"
  pass=$(grep -c '^PASS' "$r" 2>/dev/null); fail=$(grep -c '^FAIL' "$r" 2>/dev/null)
  win=$(sed -n 's/.*GPU idle share (window \([0-9.]*\)s).*/\1/p' "$r" | head -1)
  idle=$(sed -n 's/.*GPU idle share (window [0-9.]*s) *//p' "$r" | head -1)
  util=$(sed -n 's/.*GPU utilisation (nvidia-smi, 0.5 s) *//p' "$r" | head -1)
  # jobs of the phase (verifications included) from the worker logs' results
  jobs=$(cat "$OUT/$name"/logs/worker-gpu*.log 2>/dev/null | grep -c '(speedup [0-9.-]*)$')
  batches=$(cat "$OUT/$name"/logs/worker-gpu*.log 2>/dev/null | grep -c 'jobs leased together')
  rate=$(python3 -c "import sys; w=float('${win:-0}' or 0); print(round(${jobs:-0} * 3600 / w) if w > 0 else '-')")
  rows+=("$(printf '| %-14s | %4s/%-4s | %5s | %7s s | %6s | %9s | %-40s | %s |' "$name" "$pass" "$fail" "$jobs" "${win:--}" "$batches" "$rate" "${idle:--}" "${util:--}")")
  echo "[bench_farm_gpu] $name: rc $rc in $((SECONDS - t0)) s" >&2
done
echo
echo "| build | checks pass/fail | GPU jobs | window | batches | evals/GPU-hour | idle share (judge busy) | nvidia-smi |"
echo "|---|---|---:|---:|---:|---:|---|---|"
printf '%s\n' "${rows[@]}"
