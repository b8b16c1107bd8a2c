VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-cluster lint install clean bench

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/rewards serve

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest -q

# The cluster suite: each engine as a local cluster (3 Kafka brokers, 3 Redis masters, 2 ClickHouse shards).
test-cluster: $(STAMP)
	$(PY) -m pytest -q -m cluster

# Benchmarks (not part of `make test`): every suite, both shapes, one table (README.md, "Benchmarks").
# Generated data is kept in .bench-data between runs; BENCH_ARGS="--quick" for a short trial.
bench: $(STAMP)
	$(PY) -m bench $(BENCH_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) data
