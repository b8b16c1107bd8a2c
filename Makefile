VENV ?= .venv
PY := $(VENV)/bin/python
# Two installs: `make run` needs the service's own dependencies only; the tests, benchmarks and linters add theirs.
STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: run demo test test-cluster lint install clean bench

# uv (from PyPI, into the venv) installs what pip would, resolved the same way, in seconds instead of a minute:
# the suite's clock starts at the clone. `pip install -e .` works as well.
UV := $(VENV)/bin/uv
$(STAMP): pyproject.toml
	@echo "Installing the service into $(VENV)..."
	@python3 -m venv $(VENV)
	@$(PY) -m pip install -q --disable-pip-version-check uv
	@$(UV) pip install -q --python $(PY) -e .
	@touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	@echo "Installing the tests' and benchmarks' dependencies..."
	@$(UV) pip install -q --python $(PY) -e '.[dev]'
	@touch $(DEV_STAMP)

# tests/web/test_docs_page.py drives Debian's Chromium (playwright's own browser download cannot work here). Installed
# when apt-get can (root); otherwise that test skips, and fails under CI=true.
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "Installing Debian's chromium for the browser test"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null \
		|| (apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null) \
		|| echo "chromium: could not be installed"; \
	else echo "chromium: not installed (apt-get install chromium), the browser test needs it"; fi

install: $(DEV_STAMP)

run: $(STAMP)
	$(VENV)/bin/rewards serve

# A demo project, "Demo shop", on the server `make run` serves (leave it running; run this in another terminal, in the
# same folder): prints its service_role key and the console's address (docs/demo.md). DEMO_ARGS="--conversions 500"
# for a smaller one, "--seed N" for other people.
demo: $(STAMP)
	$(VENV)/bin/rewards demo $(DEMO_ARGS)

# The single-node suite, then the cluster tests that take about a minute (the state store's contract on a Redis
# Cluster, a data dir's state moved into one, the sharded warehouse). In two sessions: the cluster stacks and the single-node one would otherwise share
# a broker and a consumer group. make test-cluster runs the whole cluster suite (3 Kafka brokers, 3 Redis masters,
# 2 ClickHouse shards; ~3.5 min, ~2.5 GB more): besides these, the broker kills under load and the contract suite
# on two shards, which would take make test past 13 of CI's 15 minutes.
QUICK_CLUSTER_TESTS := tests/contract tests/adapters/test_key_cache.py tests/adapters/test_redis_cluster.py \
	tests/adapters/test_clickhouse_shards.py tests/runtime/test_moving_state_people.py tests/runtime/test_moving_state_money.py
# The single-node suite runs in TEST_WORKERS processes (pytest-xdist), a test module whole in one of them (its
# module-scoped servers stay its own); each process starts its own engines. TEST_WORKERS=0: one process. Modules are
# handed out longest first (tests/conftest.py SLOWEST_FIRST), not by their number of tests. The 40 slowest tests are
# listed at the end (where the suite's minutes go).
TEST_WORKERS ?= 2
test: $(DEV_STAMP) $(CHROMIUM)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=40
	$(PY) -m pytest -q -m cluster $(QUICK_CLUSTER_TESTS)

test-cluster: $(DEV_STAMP)
	$(PY) -m pytest -q -m cluster

# Benchmarks (not part of `make test`): every suite, both shapes, one table (docs/benchmarks.md).
# Generated data is kept in .bench-data between runs; BENCH_ARGS="--quick" for a short trial.
bench: $(DEV_STAMP)
	$(PY) -m bench $(BENCH_ARGS)

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) data
