import functools

import httpx._transports.default
import pytest

from rewards.devengines.clickhouse import connect
from tests.support.harness import Admin, Api, Gateway, ProductionServer, Server

pytest_plugins = [
    "tests.support.real_engines",
    "tests.support.redis_cluster",
    "tests.support.kafka_cluster",
    "tests.support.clickhouse_cluster",
]

# Each httpx client (and each httpx.get) loads the CA bundle into an SSL context of its own: 30-60 ms of CPU, for
# thousands of clients of plain-HTTP local servers (tests' per-test clients, health polls). One context serves them
# all; httpx 0.28 builds it in its transports' module (tests/adapters/test_dependencies.py checks the name exists).
httpx._transports.default.create_ssl_context = functools.lru_cache(maxsize=8)(
    httpx._transports.default.create_ssl_context
)

# Under pytest-xdist (the Makefile: --dist loadfile --no-loadscope-reorder) modules are handed to the processes in
# the order of the items: the longest first (their sums of test time in a CI run), so that none of them is left
# running alone at the end while the other process idles. The rest keep pytest's order.
SLOWEST_FIRST = (
    "tests/bench/test_bench_smoke.py",
    "tests/stream_workers/test_faust_workers.py",
    "tests/runtime/test_production_faults.py",
    "tests/runtime/test_move_to_production.py",
    "tests/adapters/test_redis_loss.py",
    "tests/stream_workers/test_webhook_deliveries.py",
    "tests/ingest_api/test_affiliates.py",
    "tests/query_api/test_console.py",
    "tests/schemas/test_escaping.py",
)


def pytest_collection_modifyitems(items: list) -> None:
    rank = {module: n for n, module in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))  # stable: a module's order kept


SERVICE = "service_role"
# The contract suite runs against every shape: tests that take `server` (or `api`) run once for each. `sharded`,
# the production shape on a warehouse of two ClickHouse shards, runs with the cluster suite (make test-cluster).
SHAPES = ["embedded", "production", pytest.param("sharded", marks=pytest.mark.cluster)]


@pytest.fixture(scope="session")
def embedded_server(tmp_path_factory):
    server = Server(tmp_path_factory.mktemp("serve") / "data").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def production_server(kafka_url, redis_url, clickhouse_url):
    engines = {"KAFKA_BOOTSTRAP_SERVERS": kafka_url, "REDIS_URL": redis_url, "CLICKHOUSE_URL": clickhouse_url}
    # Two worker processes share the partitions, over which each project's conversions spread (schemas.topics).
    server = ProductionServer(engines, worker_processes=2).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def sharded_kafka(tmp_path_factory):
    """A broker of the sharded stack's own: its workers must not share a consumer group with another stack's."""
    from tests.support.real_engines import _own_engine  # (imported here: the plugin is registered after this module)

    yield from _own_engine("kafka", tmp_path_factory.mktemp("sharded-kafka"))


@pytest.fixture(scope="session")
def sharded_server(sharded_kafka, redis_url, clickhouse_cluster):
    """The production shape with its warehouse sharded over two ClickHouse nodes (tests/support/clickhouse_cluster.py):
    `rewards migrate` makes the `_local` and Distributed tables on each; the services know only CLICKHOUSE_URL."""
    database = "contract_sharded"
    for url in clickhouse_cluster.urls:
        admin = connect(url)
        admin.command(f"CREATE DATABASE IF NOT EXISTS {database}")
        admin.close()
    urls = [f"{url.rstrip('/')}/{database}" for url in clickhouse_cluster.urls]
    engines = {
        "KAFKA_BOOTSTRAP_SERVERS": sharded_kafka.url,
        "REDIS_URL": redis_url,
        "CLICKHOUSE_URL": urls[0],
        "REWARDS_CLICKHOUSE_CLUSTER": clickhouse_cluster.cluster,
        "REWARDS_CLICKHOUSE_NODES": ",".join(urls),
    }
    server = ProductionServer(engines).start()
    yield server
    server.stop()


@pytest.fixture(scope="session", params=SHAPES)
def server(request):
    return request.getfixturevalue(f"{request.param}_server")


@pytest.fixture(scope="module", params=["embedded", "production"])
def client_base(request):
    """A shape's server and the one base URL a client is given (the published client, a browser): the production
    shape's is a gateway routing each path to its service, as deploy/gateway.conf does."""
    server = request.getfixturevalue(f"{request.param}_server")
    if request.param == "embedded":
        yield server, server.url
        return
    gateway = Gateway(server)
    yield server, gateway.url
    gateway.close()


@pytest.fixture(scope="session")
def admin(server) -> Admin:
    return Admin(server)


@pytest.fixture
def project(admin) -> str:
    """A fresh project per test: projects never see each other's data, so tests stay independent."""
    return admin.project()


@pytest.fixture
def make_api(server, admin, project):
    clients = []

    def make(*scopes: str, project_id: str | None = None) -> Api:
        pid = project_id or project
        client = Api(server, admin.key(pid, *scopes), pid)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def api(make_api) -> Api:
    """A service_role key: accepted wherever any scope is required."""
    return make_api(SERVICE)


EVM = [f"0x{n:040x}" for n in range(1, 200)]


def evm(n: int) -> str:
    return EVM[n]


def event(dedup_id: str, user: str = "0x" + "a" * 40, name: str = "purchase", **extra) -> dict:
    return {"name": name, "user_identifier": user, "user_identifier_type": "evm_address", "dedup_id": dedup_id, **extra}
