VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint install clean bench

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

# Benchmarks (not part of `make test`): the data is generated once into $(BENCH_DATA), then reused.
BENCH_DATA ?= .bench-data
bench: $(STAMP)
	test -f $(BENCH_DATA)/bench.json || $(PY) -m bench.generate_affiliates --data-dir $(BENCH_DATA)
	$(PY) -m bench.bench_affiliates --data-dir $(BENCH_DATA)

lint: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) data
