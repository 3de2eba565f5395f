# Two commands on a fresh machine: `make demo` and `make test`. Each sets up .venv first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint format pytest bench clean setup

setup: $(STAMP)

# torch is pinned in the same pip command so pip takes the CPU build on disk, never a CUDA build.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "torch==2.13.0" -e ".[dev]"
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/pubsubml demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff check --fix src tests benchmarks
	$(BIN)/ruff format src tests benchmarks

# One pytest session on two worker processes (pytest-xdist). tests/conftest.py puts the end-to-end
# runs (marked slow) first and --dist loadgroup hands tests out one at a time (a worker gets more
# when it has two or fewer left), so the long runs start at once on both workers and the short
# tests fill in around them; the ray-marked tests form one group, run on one worker in one child.
# `pytest -m "not slow"` is the quick loop.
pytest: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup

test: lint pytest

bench: $(STAMP)
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
