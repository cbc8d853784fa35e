#!/usr/bin/env bash
# The GPU checks, on a machine with a CUDA device and a python3 that has torch (CUDA build), as the
# device tool's machines have: the @pytest.mark.gpu tests, the whole suite with CUDA present (one
# process), and the GPU benchmark (which rewrites its section of docs/benchmarks.md). Logs and a dated
# table go to ${OUT:-/tmp/gpu_check}. Exits non-zero when any test fails.
#   bash tools/gpu_check.sh            # everything (about 5 minutes on an H100)
#   bash tools/gpu_check.sh quick      # GPU tests and a 3-round benchmark only
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu_check}; mkdir -p "$out"
export PYTHONUNBUFFERED=1 PERFMAGIC_CACHE_DIR=$out/cache
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$out/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())" | tee -a "$out/gpu.txt"
rc=0
start=$(date +%s)
if [ "${1:-}" != quick ]; then
  # the whole suite in one process with CUDA present, the gpu tests included
  python3 -m pytest -q -p no:cacheprovider -rfEs tests --ignore=tests/browser \
    --junitxml="$out/suite.xml" > "$out/suite_with_cuda.log" 2>&1 || rc=$?
  bench_args=()
else
  python3 -m pytest -q -p no:cacheprovider -m gpu -rA tests --junitxml="$out/suite.xml" \
    > "$out/suite_with_cuda.log" 2>&1 || rc=$?
  bench_args=(--quick)
fi
tail -n 40 "$out/suite_with_cuda.log"
python3 benchmarks/bench_gpu.py "${bench_args[@]}" > "$out/bench_gpu.log" 2>&1 || rc=$((rc ? rc : 3))
tail -n 30 "$out/bench_gpu.log"
{
  echo "| date | GPU | suite | seconds |"
  echo "|---|---|---|---|"
  echo "| $(date -u +%Y-%m-%dT%H:%MZ) | $(head -n 2 "$out/gpu.txt" | tail -n 1 | cut -d, -f1) | $(tail -n 1 "$out/suite_with_cuda.log") | $(( $(date +%s) - start )) |"
} > "$out/table.md"
cat "$out/table.md"
cp docs/benchmarks.md "$out/benchmarks.md"; cp benchmarks/results/gpu.json "$out/gpu.json" 2>/dev/null || true
exit "$rc"
