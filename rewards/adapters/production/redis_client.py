"""The production shape's Redis client: one node, or a Redis Cluster.

Every place the production shape opens a Redis client (the state store, the rate limiter, the outbox relay, and
through the state store the workers and the CLI) opens it with `open_redis`, which picks redis-py's client by the
setting REDIS_CLUSTER (Settings.redis_cluster):

- `false`: `redis.asyncio.Redis`, one node (or a proxy that hides a cluster);
- `true`: `redis.asyncio.cluster.RedisCluster`; REDIS_URL names any one node, the client finds the others and
  follows the slots when they move;
- `auto` (the default): the node at REDIS_URL is asked once, when the client is opened (`INFO cluster`).

What the callers keep to, so that the same calls work on both clients: every Lua script and every multi-key
command touches the keys of one slot only (rewards.adapters.production.redis_keys puts each project's keys under one
hash tag); there are no MULTI/WATCH transactions (a step that must be atomic is a script: redis-py's cluster pipeline
cannot run a transaction under WATCH from asyncio); SCAN and DBSIZE cover every master (redis-py's cluster client
sends them to each). A PUBLISH on a cluster reaches the subscribers of every node, but its reply counts those of
its own node only (RedisStateStore._tell_key_change counts them on every node).
"""

from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from rewards.settings import Settings

RedisClient = Redis | RedisCluster


async def open_redis(url: str, settings: Settings | None = None, **options: Any) -> RedisClient:
    """A client of the Redis at `url`, a single node or a cluster (by REDIS_CLUSTER), once it answers (it raises
    redis-py's ConnectionError if not). `options` go to the client (decode_responses, retry, ...)."""
    mode = (settings or Settings()).redis_cluster
    cluster = mode == "true" or (mode == "auto" and await cluster_enabled(url, **options))
    client = RedisCluster.from_url(url, **options) if cluster else Redis.from_url(url, **options)
    try:
        await client.ping()  # (a cluster's client learns which node serves which slot here)
    except BaseException:
        await client.aclose()
        raise
    return client


async def cluster_enabled(url: str, **options: Any) -> bool:
    """Whether the node at `url` is a node of a Redis Cluster."""
    async with Redis.from_url(url, **options) as node:
        return (await node.info("cluster")).get("cluster_enabled") == 1


def is_cluster(client: RedisClient) -> bool:
    return isinstance(client, RedisCluster)
