# The two commands: `make run` (the demo pipeline on the bundled sample) and `make test`.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: run test test-fast test-long lint bench clean

# the C extensions are built by the editable install: a changed .c file reinstalls
$(STAMP): pyproject.toml amrsim/metrics/_smatch_core.c amrsim/amr/_penman_reader.c amrsim/amr/_smatch_encoding.h amrsim/metrics/_wwlk_core.c amrsim/warehouse/_keys.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# uv installs what pip would (same sources and caps: .ci/uv_pip_args.py reads pip's config) in about a minute
	# instead of three, compiling the bytecode as pip does (else each module is compiled at its first import, by the
	# tests); pip itself where uv cannot be had or fails
	( $(BIN)/pip install -q --disable-pip-version-check uv && \
	  $(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python $$($(BIN)/python .ci/uv_pip_args.py) -e '.[dev]' ) || \
	  $(BIN)/pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/amrsim run

test: $(STAMP)
	$(BIN)/ruff check amrsim tasks flows tests benchmarks
	$(BIN)/lint-imports
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $(BIN)/pytest -q -ra -n 2 --dist worksteal -m "not long"

# Two test processes (pytest-xdist): the suite is mostly one-core work and waits on subprocesses (Prefect servers,
# Ray, signalled runs), so two halve it on a 2-core machine. Each process, and each it starts, runs torch, OpenMP and
# BLAS on one thread, so the two never fight for the two cores with spinning threads. Tests share no paths or ports:
# each has its own tmp dir.
# unit tests only: no Prefect, Ray, training or subprocess runs (the tests marked slow)
test-fast: $(STAMP)
	$(BIN)/pytest -q -ra -m "not slow"

# the full-size variants `make test` runs on a sample (every shared graph, 10,000 sentences) and the tests that wait
# out a library's own timeout (Ray's agents after a SIGKILL): minutes more
test-long: $(STAMP)
	$(BIN)/pytest -q -ra -n 2 --dist worksteal -m long

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_demo_rerun.py

clean:
	rm -rf .amrsim warehouse/*/ 
