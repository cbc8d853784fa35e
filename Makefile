# Two commands do all set-up on a fresh machine:
#   make tour   - create .venv, install perfmagic, execute notebooks/00_tour.ipynb on the CPU -> notebooks/00_tour.html
#   make test   - create .venv, install perfmagic with its test tools, run the test suite
# torch is installed first, pinned, so pip never pulls the CUDA build with its several GB of packages.

PY       ?= python3
VENV     ?= .venv
BIN      := $(VENV)/bin
TORCH    ?= torch==2.13.0
STAMP    := $(VENV)/.perfmagic-installed

.PHONY: tour test bench venv clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install "$(TORCH)"
	$(BIN)/python -m pip install -e ".[dev]"
	touch $(STAMP)

venv: $(STAMP)

tour: $(STAMP)
	$(BIN)/python notebooks/run.py notebooks/00_tour.ipynb

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m pip install -e ".[dev,bench]"
	$(BIN)/python benchmarks/bench_load_ext.py
	$(BIN)/python benchmarks/bench_timing_quality.py
	$(BIN)/python benchmarks/bench_ab.py
	$(BIN)/python benchmarks/bench_roofline.py
	$(BIN)/python benchmarks/bench_amdahl.py
	$(BIN)/python benchmarks/bench_gpu.py

clean:
	rm -rf $(VENV) notebooks/*.html .perfmagic notebooks/.perfmagic
