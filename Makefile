# Two commands do all set-up on a fresh machine:
#   make tour   - create .venv, install perfmagic, execute notebooks/00_tour.ipynb on the CPU -> notebooks/00_tour.html
#   make test   - create .venv, install perfmagic with its test tools, run everything CI runs:
#                 the unit tests, every notebook executed and checked, the docs site built strictly,
#                 the real-browser test of the widgets in JupyterLab, and a smoke run of every benchmark
# torch is installed first, pinned to the version the project is tested with. Which build pip picks is
# up to the index it reads: from PyPI alone, on Linux x86-64, torch==2.13.0 is the CUDA build (it pulls
# about 17 nvidia-* packages, several GB). For the CPU-only build, name PyTorch's CPU index:
#   make test TORCH_INDEX=https://download.pytorch.org/whl/cpu
# Empty (the default): pip uses whatever index this machine's pip is configured with.
# Finer targets: make unit | unit-busy | notebooks | docs | browser | bench | bench-quick | pod-check | binder-check
#   make bench       - every benchmark script in full, one after another, stopping at the first failure; each
#                 writes its section of docs/benchmarks.md only from a committed tree (see benchmarks/_common.py)
#   make bench-quick - every script with --quick --no-docs: a smoke test (each code path once, tiny work; the
#                 numbers mean nothing; a raising trial fails it), so none can rot; a stage of make test (CI)
#   make binder-check - the workshop run against Binder's package set: a separate venv (.binder-venv) with
#                 exactly what binder/environment.yml names (translated to pip by tools/binder_requirements.py;
#                 torch pinned as above), perfmagic installed by binder/postBuild itself (no dev extras),
#                 then the workshop inside a 2 GiB / 2-CPU pod (tools/pod_check.py: needs root and cgroups)

PY       ?= python3
VENV     ?= .venv
BIN      := $(VENV)/bin
TORCH    ?= torch==2.13.0
TORCH_INDEX ?=
TORCH_PIP := $(if $(strip $(TORCH_INDEX)),--index-url $(TORCH_INDEX),)
STAGES   := unit notebooks docs browser bench-quick
STAMP    := $(VENV)/.perfmagic-installed
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9]*.ipynb))
BINDER_VENV ?= .binder-venv
BINDER_STAMP := $(BINDER_VENV)/.binder-installed

.PHONY: tour test unit unit-busy notebooks docs browser bench bench-quick pod-check binder-check venv clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install $(TORCH_PIP) "$(TORCH)"
	$(BIN)/python -m pip install -e ".[dev,docs,browser]"
	touch $(STAMP)

venv: $(STAMP)

tour: $(STAMP)
	$(BIN)/python notebooks/run.py notebooks/00_tour.ipynb

# every stage runs, even after one fails; one line per stage at the end; fails if any stage failed
test: $(STAMP)
	@rm -f $(VENV)/.stages; \
	for s in $(STAGES); do \
	  t0=$$(date +%s); \
	  if $(MAKE) --no-print-directory $$s; then r=ok; else r=FAILED; fi; \
	  printf 'make test: %-10s %-6s (%s s)\n' "$$s" "$$r" "$$(( $$(date +%s) - t0 ))" >> $(VENV)/.stages; \
	done; \
	echo; cat $(VENV)/.stages; \
	! grep -q FAILED $(VENV)/.stages

unit: $(STAMP)
	$(BIN)/python -m pytest -q --ignore=tests/browser

# the unit tests beside one busy-loop process we start and stop ourselves (a planted noisy neighbour)
unit-busy: $(STAMP)
	$(BIN)/python -m perfmagic.core.neighbours 1 -- $(BIN)/python -m pytest -q --ignore=tests/browser

# the workshop notebook inside a made-up Binder-sized pod (a 2 GiB memory limit, a 2-CPU quota; needs root
# and writable cgroups): its peak memory, CPU and wall time, and any OOM kill
pod-check: $(STAMP)
	$(BIN)/python tools/pod_check.py --memory 2G --cpus 2 -- $(BIN)/python notebooks/run.py --check notebooks/10_one_change_at_a_time.ipynb

# Binder's package set, nothing more: pytest, nbclient and the rest only if environment.yml names them
$(BINDER_STAMP): binder/environment.yml binder/postBuild tools/binder_requirements.py pyproject.toml
	test -x $(BINDER_VENV)/bin/python || $(PY) -m venv $(BINDER_VENV)
	$(BINDER_VENV)/bin/python -m pip install --upgrade pip
	$(BINDER_VENV)/bin/python -m pip install $(TORCH_PIP) "$(TORCH)"
	$(BINDER_VENV)/bin/python tools/binder_requirements.py binder/environment.yml > $(BINDER_VENV)/requirements.txt
	$(BINDER_VENV)/bin/python -m pip install -r $(BINDER_VENV)/requirements.txt
	PATH="$(abspath $(BINDER_VENV))/bin:$$PATH" bash binder/postBuild
	touch $(BINDER_STAMP)

# the workshop against Binder's package set, inside a Binder-sized pod (as pod-check): its peak memory, CPU and
# wall time, any OOM kill, and every notebook check. An empty roofs cache, as in a fresh Binder pod: the
# roofs calibration (sized from the pod's memory) runs inside the pod and counts in its peak
binder-check: $(BINDER_STAMP)
	cache=$$(mktemp -d) && PERFMAGIC_CACHE_DIR=$$cache $(BINDER_VENV)/bin/python tools/pod_check.py --memory 2G --cpus 2 -- $(BINDER_VENV)/bin/python notebooks/run.py --check notebooks/10_one_change_at_a_time.ipynb; \
	rc=$$?; rm -rf "$$cache"; exit $$rc

notebooks: $(STAMP)
	$(BIN)/python notebooks/run.py --check $(NOTEBOOKS)

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict
	$(BIN)/python tools/check_site_offline.py site

browser: $(STAMP)
	test -x /usr/bin/chromium || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium fonts-dejavu-core; }
	$(BIN)/python -m pytest -q tests/browser

# Every benchmark script, and each of its modes that writes its own section ('+' stands for a space).
# tests/test_benchmarks_quick.py checks that every benchmarks/bench_*.py is here.
BENCH_RUNS := bench_load_ext.py bench_timing_quality.py bench_timing_quality.py+--neighbours+1 bench_gpu.py \
	bench_ab.py bench_verdicts.py bench_roofline.py bench_ceilings.py bench_amdahl.py bench_usl_fit.py \
	bench_ranks.py bench_estimate.py bench_dataloader.py bench_dataloader.py+--threads bench_flame.py \
	bench_flame.py+--native bench_memprof.py bench_ledger.py bench_guard.py bench_next.py bench_training_loop.py \
	bench_where.py
# modes that print only (no section of their own): smoke-tested, not part of the full run
BENCH_QUICK_ONLY := bench_estimate.py+--accuracy
BENCH_STAMP := $(VENV)/.perfmagic-bench-installed

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install -e ".[dev,bench]"
	touch $(BENCH_STAMP)

# full runs, in sequence; stops at the first failure. A section is written only from a clean tree
# (git status --porcelain -- src benchmarks); otherwise each script prints its table and says why not.
bench: $(BENCH_STAMP)
	@test -z "$$(git status --porcelain -- src benchmarks ':(exclude)benchmarks/results')" || \
	  echo "make bench: uncommitted changes in src/ or benchmarks/: the tables are printed, docs/benchmarks.md is not written"
	@for run in $(BENCH_RUNS); do \
	  cmd=$$(echo "$$run" | tr '+' ' '); t0=$$(date +%s); \
	  echo "== $(BIN)/python benchmarks/$$cmd"; \
	  $(BIN)/python benchmarks/$$cmd || { echo "make bench: benchmarks/$$cmd FAILED"; exit 1; }; \
	  echo "make bench: benchmarks/$$cmd ok ($$(( $$(date +%s) - t0 )) s)"; \
	done

# every script (and mode) with --quick --no-docs: a smoke test (every code path once, the smallest work; the
# numbers mean nothing), one line per run with its time; a run fails when any of its trials raises, its output is
# shown and the target fails after the others have run. Budget: ~10 s a script, ~150 s in all on a quiet 2-core VM.
bench-quick: $(BENCH_STAMP)
	@mkdir -p $(VENV)/bench-quick; rm -f $(VENV)/bench-quick/*.log; t00=$$(date +%s); fail=0; \
	echo "bench-quick: smoke runs, numbers mean nothing; load average $$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"; \
	for run in $(BENCH_RUNS) $(BENCH_QUICK_ONLY); do \
	  cmd=$$(echo "$$run" | tr '+' ' '); log=$(VENV)/bench-quick/$$(echo "$$run" | tr '+' '_').log; t0=$$(date +%s); \
	  if $(BIN)/python benchmarks/$$cmd --quick --no-docs > "$$log" 2>&1; then r=ok; else r=FAILED; fail=1; cat "$$log"; fi; \
	  printf 'bench-quick: %-40s %-6s (%s s)\n' "$$cmd" "$$r" "$$(( $$(date +%s) - t0 ))"; \
	done; \
	echo "bench-quick: total $$(( $$(date +%s) - t00 )) s, load average $$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null) (logs in $(VENV)/bench-quick/)"; \
	exit $$fail

clean:
	rm -rf $(VENV) $(BINDER_VENV) site build notebooks/*.html notebooks/_executed .perfmagic notebooks/.perfmagic
