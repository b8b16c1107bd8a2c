import pytest

from tests.harness import Admin, Api, ProductionServer, Server

pytest_plugins = ["tests.real_engines", "tests.redis_cluster"]

SERVICE = "service_role"
# The contract suite runs against every shape: tests that take `server` (or `api`) run once for each.
SHAPES = ["embedded", "production"]


@pytest.fixture(scope="session")
def embedded_server(tmp_path_factory):
    server = Server(tmp_path_factory.mktemp("serve") / "data").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def production_server(kafka_url, redis_url, clickhouse_url):
    engines = {"KAFKA_BOOTSTRAP_SERVERS": kafka_url, "REDIS_URL": redis_url, "CLICKHOUSE_URL": clickhouse_url}
    server = ProductionServer(engines).start()
    yield server
    server.stop()


@pytest.fixture(scope="session", params=SHAPES)
def server(request):
    return request.getfixturevalue(f"{request.param}_server")


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
