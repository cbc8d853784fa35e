#!/usr/bin/env bash
# The GPU checks, on a machine with a CUDA device and a python3 that has torch (CUDA build), as the
# device tool's machines have: the @pytest.mark.gpu tests, the whole suite with CUDA present, and the GPU
# benchmark (which rewrites its section of docs/benchmarks.md). Logs go to ${OUT:-/tmp/gpu_check}.
#   bash tools/gpu_check.sh            # everything (about 5 minutes on an H100)
#   bash tools/gpu_check.sh quick      # GPU tests and a 3-round benchmark only
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu_check}; mkdir -p "$out"
export PYTHONUNBUFFERED=1 PERFMAGIC_CACHE_DIR=$out/cache
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$out/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())" | tee -a "$out/gpu.txt"
python3 -m pytest -q -p no:cacheprovider -m gpu -rA tests 2>&1 | tee "$out/gpu_tests.log"
if [ "${1:-}" != quick ]; then
  python3 -m pytest -q -p no:cacheprovider -m "not gpu" tests --ignore=tests/browser -x 2>&1 | tail -n 30 | tee "$out/suite_with_cuda.log"
  python3 benchmarks/bench_gpu.py 2>&1 | tee "$out/bench_gpu.log"
else
  python3 benchmarks/bench_gpu.py --quick 2>&1 | tee "$out/bench_gpu.log"
fi
cp docs/benchmarks.md "$out/benchmarks.md"; cp benchmarks/results/gpu.json "$out/gpu.json" 2>/dev/null
