from tests.contract.support import (  # noqa: F401 (fixtures)
    cluster_store,
    other_pid,
    pid,
    redis_store,
    redis_url,
    sqlite_store,
    store,
)
