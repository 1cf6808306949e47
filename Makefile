# The two commands of README.md. Both create .venv if it is missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: run test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# `make run` installs the package as a user would, not editable (setuptools prints a warning box
# for every editable install), and again whenever its sources change; `make test` installs it
# editable with the test extra, so that the suite sees every edit. Each replaces the other's install.
SOURCES := pyproject.toml $(shell find simdoc -name '*.py' -o -name '*.txt')

$(VENV)/.installed: $(SOURCES) | $(BIN)/python
	$(BIN)/python -m pip install --quiet .
	rm -f $(VENV)/.installed-test
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	$(BIN)/simdoc pairs sample_corpus

# lint-imports: the import contracts of pyproject.toml (layers, no cycles), before the tests.
test: $(VENV)/.installed-test
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

# A small side-by-side run (20,000 generated documents); see benchmarks/README.md for 100k/1M.
BENCH_DOCS ?= 20000
bench: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/gen_corpus.py build/bench-$(BENCH_DOCS) --docs $(BENCH_DOCS) --seed 20 --force
	$(BIN)/python benchmarks/run_bench.py build/bench-$(BENCH_DOCS) --simdoc-cmd $(BIN)/simdoc --out build/bench-$(BENCH_DOCS).json

clean:
	rm -rf $(VENV) build *.egg-info
