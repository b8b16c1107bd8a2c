"""The StateStore contract, one module per port of rewards.ports (test_<port>_store.py), run against every adapter:
SQLite (the reference) and Redis (a real local redis-server, or REDIS_URL when set), and with `-m cluster` on a
Redis Cluster too (tests.support.redis_cluster: a local cluster of 3 masters, or REDIS_CLUSTER_URL). The adapters
are the `store` fixture's parameters (support.py): a new adapter joins there, and its author can run one port's contract
at a time (`pytest tests/contract/test_referral_store.py`). test_redis_state.py holds the Redis adapter's own
tests; test_port_classes.py, that each adapter is a class for each port. Each test works in a project of its own."""
