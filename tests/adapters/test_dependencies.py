"""The internals of faust-streaming, mode-streaming and aiokafka that our code relies on.

pyproject.toml pins faust-streaming and aiokafka to the minor versions tested. This module fails at once,
naming what is missing, when an upgrade (or an install outside the pins) loses a private attribute or
method we use, instead of the workers failing in production, or, worse, quietly reading aborted records.

stream_workers/faust_app.py:
- `AIOKafkaConsumerThread._create_worker_consumer` (overridden to ask for read_committed) and
  `AIOKafkaConsumer._isolation_level` (set before `start()`, which builds the fetcher from it);
- `faust_aiokafka.Consumer._new_consumer_thread`, `faust_aiokafka.Transport.Consumer` and
  `App._new_transport` (overridden, to plug the thread above in);
- `app.consumer._thread._consumer._fetcher._isolation_level` and `aiokafka.consumer.fetcher.READ_COMMITTED`
  (`isolation_level()`, checked on the first batch);
- `app.consumer._commit` and `app.consumer._thread.crash_reason` (`Pipeline._commit`);
- `Worker._schedule_shutdown` (overridden) and `Worker._signal_stop_time` (mode's, read by the override).
rewards/adapters/production/kafka_log.py:
- `AIOKafkaProducer._txn_manager`, its `state` and `aiokafka.producer.transaction_manager.TransactionState`.
"""

import inspect
import tomllib
from importlib.metadata import version
from pathlib import Path

import faust
import httpx
import mode
import mode.threads
import pytest
from faust.transport.drivers import aiokafka as faust_aiokafka
from packaging.requirements import Requirement

from rewards.adapters.production import kafka_log
from rewards.settings import Settings
from stream_workers import faust_app

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


@pytest.mark.parametrize("name", ["faust-streaming", "aiokafka"])
def test_the_installed_version_is_within_the_pins(name):
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    (requirement,) = [Requirement(d) for d in dependencies if Requirement(d).name == name]
    assert requirement.specifier.contains(version(name)), f"{name} {version(name)} is not {requirement.specifier}"
    assert any(spec.operator == "<" for spec in requirement.specifier), f"{name} has no upper bound"


# (class, method, its parameters after self): a method we override or call, with the signature we assume.
METHODS = [
    (faust_aiokafka.AIOKafkaConsumerThread, "_create_worker_consumer", ["transport"]),
    (faust_aiokafka.Consumer, "_new_consumer_thread", []),
    (faust.App, "_new_transport", []),
    (faust_aiokafka.Consumer, "_commit", ["offsets"]),
    (faust.Worker, "_schedule_shutdown", ["signal"]),
    (faust.App, "crash", ["reason"]),
]


@pytest.mark.parametrize(("owner", "name", "parameters"), METHODS, ids=[f"{o.__name__}.{n}" for o, n, _ in METHODS])
def test_private_methods_we_override_or_call_are_there(owner, name, parameters):
    method = getattr(owner, name, None)
    assert callable(method), f"{owner.__module__}.{owner.__qualname__}.{name} is gone"
    assert list(inspect.signature(method).parameters)[1:] == parameters, f"{name}{inspect.signature(method)}"


def test_what_our_subclasses_build_on():
    # _Consumer._new_consumer_thread builds the thread as faust does (WorkersApp builds its _Transport as
    # faust does too: the app test below builds one).
    assert list(inspect.signature(faust_aiokafka.AIOKafkaConsumerThread).parameters)[:1] == ["consumer"]
    assert "loop" in inspect.signature(mode.threads.ServiceThread).parameters  # the rest go on as keywords
    assert "beacon" in inspect.signature(mode.Service).parameters
    assert faust_aiokafka.Transport.Consumer is faust_aiokafka.Consumer
    # mode's Worker: the stop timer is armed once, on the first signal.
    assert hasattr(faust.Worker, "_signal_stop_time") and faust.Worker._signal_stop_time is None
    assert isinstance(inspect.getattr_static(mode.Service, "crash_reason"), property)
    # Pipeline._commit tells a commit failed (not merely raced by a rebalance) by the thread's crash_reason
    # after a False: faust's thread answers False on a rebalance, and crashes itself first on anything else.
    source = inspect.getsource(faust_aiokafka.AIOKafkaConsumerThread._commit)
    assert "already rebalanced" in source and "await self.crash(exc)" in source, "faust's commit semantics changed"


async def _never_opened():
    raise AssertionError("the app is only built here, never run")


async def test_the_workers_app_reads_committed_through_the_private_path(kafka_url, tmp_path):
    """A real app's consumer, built by faust through our overrides, started against Kafka: read_committed
    reaches aiokafka's fetcher, and `isolation_level()` reads it where faust keeps it."""
    settings = Settings(kafka_bootstrap_servers=kafka_url, clickhouse_url="http://127.0.0.1:1")
    app = faust_app.build_app(settings, faust_app.WorkerOptions(), _never_opened, datadir=str(tmp_path))
    assert isinstance(app.transport, faust_app._Transport)
    thread = app.consumer._thread
    assert isinstance(thread, faust_app._ReadCommittedConsumerThread)
    assert thread.crash_reason is None
    assert thread._consumer is None  # faust's slot for the aiokafka consumer, filled when the thread starts
    consumer = thread._create_worker_consumer(app.transport)
    assert consumer._isolation_level == "read_committed"
    await consumer.start()
    try:
        thread._consumer = consumer
        assert faust_app.isolation_level(app) == "read_committed"
    finally:
        thread._consumer = None
        await consumer.stop()


async def test_the_event_log_reads_its_producers_transaction_state(kafka_url):
    producer = await kafka_log._start_producer(kafka_url, "rewards-test-dependencies")
    try:
        assert producer._txn_manager is not None
        assert kafka_log._ready_for_next(producer)  # READY: no transaction open
        await producer.begin_transaction()
        assert not kafka_log._ready_for_next(producer)
        await producer.abort_transaction()
        assert kafka_log._ready_for_next(producer)
    finally:
        await kafka_log._stop(producer)


def test_the_tests_share_one_ssl_context_through_httpx_s_own_builder():
    """tests/conftest.py caches the builder httpx's transports call (one CA bundle load for the suite's clients)."""
    import httpx._transports.default as transports

    assert hasattr(transports.create_ssl_context, "cache_info"), "httpx's transports no longer build contexts there"
    with httpx.Client() as first, httpx.Client() as second:
        assert first._transport._pool._ssl_context is second._transport._pool._ssl_context
