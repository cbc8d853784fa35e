#!/usr/bin/env bash
# The GPU checks, on a machine with a CUDA device and a python3 that has torch (CUDA build), as the
# device tool's machines have. In order, most important first:
#   1. the @pytest.mark.gpu tests, in one process (CPU cells after CUDA included);
#   2. the GPU benchmark (benchmarks/bench_gpu.py; it rewrites its section of docs/benchmarks.md);
#   3. the rest of the suite with CUDA initialised first in every test process (PERFMAGIC_TEST_CUDA_FIRST=1;
#      the bench smoke runs and the browser tests left out, as they are CPU-only):
#      one process, or SUITE_WORKERS=N processes through pytest-xdist where the lease is short.
# Logs and a dated table go to ${OUT:-/tmp/gpu_check}. Exits non-zero when any test fails.
#
#   bash tools/gpu_check.sh            # everything (about 5 to 8 minutes on an H100)
#   bash tools/gpu_check.sh quick      # GPU tests and a 2-round benchmark only
#
# On a machine that gets a copy of the files without git (the device tool's), send a clean tree and name
# its commit, so the benchmark's stamp can say which code it measured:
#   PERFMAGIC_TREE_COMMIT=$(git rev-parse --short HEAD)   (set where the command runs)
# Missing Python packages travel as wheels in .whl/ (installed to /tmp/site when that folder exists):
# tools/gpu_wheels.sh downloads them. The H200 runs of 2026-11-28 used
#   PERFMAGIC_TREE_COMMIT=<sha> SUITE_WORKERS=12 SUITE_TIMEOUT=160 bash tools/gpu_check.sh
# which took 257 s (GPU tests 39 s, the benchmark about 100 s, the suite 101 s).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu_check}; mkdir -p "$out"
export PYTHONUNBUFFERED=1 PERFMAGIC_CACHE_DIR=${PERFMAGIC_CACHE_DIR:-/tmp/perfmagic_gpu_cache} PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=$PYTHONPATH:/tmp/site PATH=/tmp/site/bin:$PATH JUPYTER_PATH=/tmp/site/share/jupyter
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv | tee "$out/gpu.txt"
python3 -c "import torch, IPython; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(), 'IPython', IPython.__version__)" | tee -a "$out/gpu.txt"
rc=0
start=$(date +%s)
pytest=(python3 -m pytest -q -p no:cacheprovider -rfEs)
"${pytest[@]}" -m gpu tests --ignore=tests/browser > "$out/gpu_tests.log" 2>&1 || rc=$?
tail -n 25 "$out/gpu_tests.log"
gpu_s=$(( $(date +%s) - start ))
bench_args=(); [ "${1:-}" = quick ] && bench_args=(--quick)
python3 benchmarks/bench_gpu.py "${bench_args[@]}" > "$out/bench_gpu.log" 2>&1 || rc=$((rc ? rc : 3))
tail -n 60 "$out/bench_gpu.log"
cp docs/benchmarks.md "$out/benchmarks.md"; cp benchmarks/results/gpu.json "$out/gpu.json" 2>/dev/null || true
suite="(not run: quick)"
if [ "${1:-}" != quick ]; then
  workers=()
  threads=${OMP_NUM_THREADS:-}
  if [ -n "${SUITE_WORKERS:-}" ]; then
    workers=(-n "$SUITE_WORKERS")
    # each test process gets its share of the cores: 8 processes of 16 torch threads each on 16 cores made
    # a 64×32×32 bmm 5.6× slower than the loop of matmuls it replaces (an H200 machine, 2026-11-28)
    threads=${threads:-$(( $(nproc) / SUITE_WORKERS > 0 ? $(nproc) / SUITE_WORKERS : 1 ))}
  fi
  # SIGINT at the time limit: pytest still prints which tests failed and why
  env PERFMAGIC_TEST_CUDA_FIRST=1 ${threads:+OMP_NUM_THREADS=$threads} timeout -s INT -k 20 "${SUITE_TIMEOUT:-900}" "${pytest[@]}" --tb=short "${workers[@]}" tests \
    -m "not gpu" --ignore=tests/browser --ignore=tests/test_benchmarks_quick.py \
    > "$out/suite_with_cuda.log" 2>&1 || rc=$((rc ? rc : 4))
  grep -E "^(FAILED|ERROR) " "$out/suite_with_cuda.log" | cut -c1-240 || true
  tail -n 3 "$out/suite_with_cuda.log"
  suite=$(tail -n 1 "$out/suite_with_cuda.log")
fi
{
  echo "| date | GPU | GPU tests | whole suite, CUDA initialised first | seconds |"
  echo "|---|---|---|---|---|"
  echo "| $(date -u +%Y-%m-%dT%H:%MZ) | $(sed -n 2p "$out/gpu.txt" | cut -d, -f1) | $(tail -n 1 "$out/gpu_tests.log") ($gpu_s s) | $suite | $(( $(date +%s) - start )) |"
} > "$out/table.md"
cat "$out/table.md"
exit "$rc"
