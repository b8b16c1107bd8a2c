"""Versioned warehouse migrations: the numbered files of schemas/clickhouse/, applied in order through the
Warehouse port (so the very same code runs on chdb in-process and on a ClickHouse server).

Each migration applied, undone, or adopted is a row of `schema_migrations` (a log: nothing is updated or
deleted); a version's latest row is its state. A migration is recorded only once all its statements have run,
so one that failed half-way runs again from its start next time: its statements are written to be run again
(`IF NOT EXISTS`, `IF EXISTS`, a backfill that empties its table first).

- Adoption: versions 1-3 predate the log. A warehouse with no log rows whose tables of those versions exist
  (an install made by the `CREATE ... IF NOT EXISTS` statements of old) records them as applied, without
  running them.
- Checksums: an applied migration whose forward statements changed since is refused, as is an applied
  version this code does not know (the warehouse is newer than the code): nothing runs until it is resolved.
- Down: `migrate(target=N)` below the current version runs the down sections, newest first; if one of the
  migrations to undo has none, nothing runs. Versions 1-3 have none (undoing them would drop every table).

- Clusters: with a `Cluster` (schemas/clickhouse/layout.py; `ClickHouseWarehouse.cluster` by default), every
  declared statement is rewritten into the sharded layout before anything runs (a statement without a sharded
  form refuses the whole run), and the log itself is sharded like the tables. A statement each node runs for
  itself is sent to each of `Cluster.nodes`, which must reach every node of the cluster's `system.clusters`
  entry (checked first); the others (ON CLUSTER, a SELECT, an insert through the Distributed tables) run once,
  on the warehouse's node. A statement runs on every node before the next one starts, so a failure leaves each
  node at the same statement, and the migration runs again from its start as on one node. The layout is checked
  against the warehouse's log: a sharded warehouse refuses a single-node run, and the other way round.

ClickHouse has no transactional DDL nor locks: one migrator at a time (`rewards migrate` runs once per
deployment; the embedded server migrates at start-up, before its worker starts). A migration that backfills
a new view must run while no worker writes (see docs/operations.md, "Migrations").
"""

import logging
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from tqdm import tqdm

from rewards.ports import Warehouse
from schemas.clickhouse import Migration, load_migrations
from schemas.clickhouse.layout import Layout, LayoutError, Placed

log = logging.getLogger(__name__)

TABLE = "schema_migrations"
BASELINE = 3  # the versions that existed before the log, adopted by the installs they made

_LOG_DDL = f"""CREATE TABLE IF NOT EXISTS {TABLE}
(
    version UInt32,
    name String,
    checksum String,
    action LowCardinality(String),
    applied_at DateTime64(3, 'UTC'),
    revision UInt64
)
ENGINE = MergeTree
ORDER BY (version, revision)"""
_READ_LOG = f"""SELECT version, argMax(name, revision) AS last_name, argMax(checksum, revision) AS last_checksum,
       argMax(action, revision) AS last_action, toString(argMax(applied_at, revision)) AS last_applied_at,
       toString(max(revision)) AS last_revision
FROM {TABLE} GROUP BY version ORDER BY version"""
_CREATES = re.compile(
    r"^CREATE\s+(?:TABLE|MATERIALIZED\s+VIEW|VIEW|DICTIONARY)\s+IF\s+NOT\s+EXISTS\s+([A-Za-z_][A-Za-z0-9_]*)\b",
    re.IGNORECASE,
)

ADOPT, APPLY, REVERT = "adopt", "apply", "revert"  # the actions of the log


class MigrationError(Exception):
    """The warehouse cannot be migrated as asked; nothing was changed unless the message says so."""


@dataclass(frozen=True)
class Cluster:
    """A warehouse sharded over a ClickHouse cluster: the layout its declared statements take, and a warehouse on
    each node of the cluster for the statements every node runs for itself (none needed with the replicated
    layout, whose ON CLUSTER statements ClickHouse sends to every node)."""

    layout: Layout
    nodes: Sequence[Warehouse] = ()


@dataclass(frozen=True)
class Recorded:
    """A version's latest row in the log."""

    version: int
    name: str
    checksum: str
    action: str
    applied_at: str  # ISO 8601, UTC

    @property
    def applied(self) -> bool:
        return self.action != REVERT


@dataclass(frozen=True)
class Step:
    migration: Migration
    action: str  # adopt | apply | revert

    def __str__(self) -> str:
        return f"{self.migration.version:03d}_{self.migration.name} ({self.action})"


@dataclass
class State:
    migrations: list[Migration]
    recorded: dict[int, Recorded]
    adoptable: list[Migration]  # baseline versions present in a warehouse without a log
    revision: int  # the log's highest revision
    layout_problem: str | None = None  # the warehouse's layout is not the one asked for

    @property
    def latest(self) -> int:
        return len(self.migrations)

    @property
    def applied(self) -> set[int]:
        return {v for v, r in self.recorded.items() if r.applied} | {m.version for m in self.adoptable}

    @property
    def version(self) -> int:
        return max(self.applied, default=0)

    def problems(self) -> list[str]:
        """What refuses any change: applied migrations unknown to this code, or changed since."""
        known = {m.version: m for m in self.migrations}
        found = [self.layout_problem] if self.layout_problem else []
        for version, recorded in sorted(self.recorded.items()):
            if not recorded.applied:
                continue
            migration = known.get(version)
            if migration is None:
                found.append(
                    f"migration {version} ({recorded.name}) is applied but unknown to this code, which knows "
                    f"1-{self.latest}: the warehouse is newer than the code (undo it with the code that has it)"
                )
            elif migration.checksum != recorded.checksum:
                found.append(
                    f"migration {version} ({migration.name}) changed since it was applied (checksum "
                    f"{recorded.checksum[:12]}, now {migration.checksum[:12]}): an applied migration must stay as "
                    "it was; restore it and put the change in a new migration"
                )
        return found


@dataclass(frozen=True)
class Run:
    """What one `migrate` did."""

    version: int
    steps: list[Step] = field(default_factory=list)

    def summary(self) -> dict:
        def versions(action: str) -> list[int]:
            return [s.migration.version for s in self.steps if s.action == action]

        return {"version": self.version, "adopted": versions(ADOPT), "applied": versions(APPLY),
                "reverted": versions(REVERT)}  # fmt: skip


async def read_state(
    warehouse: Warehouse, migrations: Sequence[Migration] | None = None, cluster: Cluster | None = None
) -> State:
    """Where the warehouse stands, read only: its log, or for an install without one, what it may adopt."""
    migrations = load_migrations() if migrations is None else list(migrations)
    engines = {row["name"]: row["engine"] for row in await warehouse.query(
        "SELECT name, engine FROM system.tables WHERE database = currentDatabase()")}  # fmt: skip
    tables = set(engines)
    recorded: dict[int, Recorded] = {}
    revision = 0
    if TABLE in tables:
        for row in await warehouse.query(_READ_LOG):
            version, applied_at = int(row["version"]), row["last_applied_at"].replace(" ", "T") + "Z"
            recorded[version] = Recorded(
                version, row["last_name"], row["last_checksum"], row["last_action"], applied_at
            )
            revision = max(revision, int(row["last_revision"]))
    # The installs made before the log were all on one node.
    adoptable = [] if recorded or cluster is not None else _adoptable(migrations, tables)
    return State(migrations, recorded, adoptable, revision, _layout_problem(engines.get(TABLE), cluster))


def _layout_problem(log_engine: str | None, cluster: Cluster | None) -> str | None:
    sharded = log_engine == "Distributed"
    if log_engine is None or sharded == (cluster is not None):
        return None
    if sharded:
        return ("the warehouse is sharded over a cluster (its log is a Distributed table): set "
                "REWARDS_CLICKHOUSE_CLUSTER and REWARDS_CLICKHOUSE_NODES")  # fmt: skip
    return (f"the warehouse is on one node (its log is a {log_engine} table), not sharded over cluster "
            f"{cluster.layout.cluster}: moving it onto a cluster is a copy of its data, not a migration")  # fmt: skip


def _adoptable(migrations: Sequence[Migration], tables: set[str]) -> list[Migration]:
    """The baseline versions whose objects all exist, from version 1 up to the first that is not whole.
    (Such a version's statements are all `CREATE ... IF NOT EXISTS`, so running it would change nothing.)"""
    adopted = []
    for migration in migrations:
        if migration.version > BASELINE:
            break
        created = [_CREATES.match(statement) for statement in migration.up]
        if not all(created) or not {match[1] for match in created} <= tables:
            break
        adopted.append(migration)
    return adopted


def plan(state: State, target: int | None = None) -> list[Step]:
    """The steps from `state` to version `target` (default: the latest): adoptions, then down steps newest
    first, then forward steps in order. Raises MigrationError when the target cannot be reached."""
    target = state.latest if target is None else target
    if not 0 <= target <= state.latest:
        raise MigrationError(f"no version {target}: the migrations run 1-{state.latest} (0: none applied)")
    problems = state.problems()
    if problems:
        raise MigrationError("refusing to migrate: " + "; ".join(problems))
    known = {m.version: m for m in state.migrations}
    applied = state.applied
    down = [known[v] for v in sorted(applied, reverse=True) if v > target]
    irreversible = [f"{m.version} ({m.name})" for m in down if m.down is None]
    if irreversible:
        raise MigrationError(
            f"cannot go down to version {target}: migration {', '.join(irreversible)} has no down steps"
        )
    up = [m for m in state.migrations if m.version <= target and m.version not in applied]
    return [Step(m, ADOPT) for m in state.adoptable] + [Step(m, REVERT) for m in down] + [Step(m, APPLY) for m in up]


async def migrate(
    warehouse: Warehouse,
    target: int | None = None,
    migrations: Sequence[Migration] | None = None,
    progress: bool = False,
    cluster: Cluster | None = None,
) -> Run:
    """Bring the warehouse to version `target` (default: the latest). `progress`: a progress bar on stderr
    while running several steps. `cluster`: by default the warehouse's own (none: one node)."""
    cluster = _cluster_of(warehouse, cluster)
    if cluster is not None:
        await _check_nodes(warehouse, cluster)
        await _make_log(warehouse, cluster)
    state = await read_state(warehouse, migrations, cluster)
    steps = plan(state, target)
    running = [s for s in steps if s.action != ADOPT]
    rewritten = _rewrite(state.migrations, running, cluster)
    if cluster is None:
        await warehouse.command(_LOG_DDL)
    nodes = () if cluster is None else cluster.nodes
    revision = state.revision
    adopted = [s for s in steps if s.action == ADOPT]
    if adopted:
        rows = []
        for step in adopted:
            revision += 1
            rows.append(_row(step, revision))
        await warehouse.insert(TABLE, rows, f"{TABLE}:{revision}")
        log.info("adopted migrations %s of an install made before the migrations log", _versions(adopted))
    bar = tqdm(running, desc="migrating", unit="migration", file=sys.stderr, disable=not progress or len(running) < 2)
    for step, statements in zip(bar, rewritten, strict=True):
        bar.set_postfix_str(str(step))
        await _run(warehouse, step, statements, nodes)
        revision += 1
        await warehouse.insert(TABLE, [_row(step, revision)], f"{TABLE}:{revision}")
        log.info("migration %s done", step)
    return Run(state.latest if target is None else target, steps)


def _cluster_of(warehouse: Warehouse, cluster: Cluster | None) -> Cluster | None:
    # A sharded warehouse's adapter carries its cluster (ClickHouseWarehouse.cluster); the others have none.
    return cluster if cluster is not None else getattr(warehouse, "cluster", None)


def _statements(step: Step) -> tuple[str, ...]:
    return step.migration.up if step.action == APPLY else step.migration.down or ()


def _rewrite(
    migrations: Sequence[Migration], steps: Sequence[Step], cluster: Cluster | None
) -> list[list[list[Placed]]]:
    """Each step's statements in the cluster's layout, all of them before anything runs: a statement without a
    sharded form changes nothing."""
    layout = cluster.layout if cluster is not None else Layout()
    try:
        tables = layout.tables(s for m in migrations for s in (*m.up, *(m.down or ())))
        return [[layout.place(s, tables) for s in _statements(step)] for step in steps]
    except LayoutError as exc:
        raise MigrationError(f"refusing to migrate: {exc}") from exc


async def _make_log(warehouse: Warehouse, cluster: Cluster) -> None:
    """The log's tables on every node, before the log is read: a first run stopped half-way through making them
    would leave a Distributed log that some shard cannot answer for. (Not beside a single-node install's log,
    which read_state refuses.)"""
    engine = await warehouse.query(
        "SELECT engine FROM system.tables WHERE database = currentDatabase() AND name = {t:String}", {"t": TABLE}
    )
    if not engine or engine[0]["engine"] == "Distributed":
        layout = cluster.layout
        await _execute(warehouse, layout.place(_LOG_DDL, layout.tables([_LOG_DDL])), cluster.nodes)


_CLUSTER_NODES = """SELECT toString(shard_num) AS shard, toString(replica_num) AS replica FROM system.clusters
WHERE cluster = {cluster:String}"""


async def _check_nodes(warehouse: Warehouse, cluster: Cluster) -> None:
    """Refuses node lists that leave out a node of the cluster: its tables would never be made."""
    if cluster.layout.replicated:
        return
    name = cluster.layout.cluster
    every = {(r["shard"], r["replica"]) for r in await warehouse.query(_CLUSTER_NODES, {"cluster": name})}
    if not every:
        raise MigrationError(f"no cluster {name} in the server's configuration (system.clusters)")
    reached = set()
    for node in cluster.nodes:
        rows = await node.query(_CLUSTER_NODES + " AND is_local", {"cluster": name})
        reached |= {(r["shard"], r["replica"]) for r in rows}
    missing = ", ".join(f"shard {shard} replica {replica}" for shard, replica in sorted(every - reached))
    if missing:
        raise MigrationError(
            f"the nodes to migrate (REWARDS_CLICKHOUSE_NODES) leave out {missing} of cluster {name}: every node "
            "creates its own tables"
        )


async def _execute(warehouse: Warehouse, statements: Sequence[Placed], nodes: Sequence[Warehouse]) -> None:
    """Each statement on every node (those each node runs for itself) or on the warehouse's, in order."""
    for placed in statements:
        for node in nodes if placed.each_node else (warehouse,):
            await node.command(placed.sql)


async def _run(warehouse: Warehouse, step: Step, statements: list[list[Placed]], nodes: Sequence[Warehouse]) -> None:
    for n, placed in enumerate(statements, start=1):
        try:
            await _execute(warehouse, placed, nodes)
        except Exception as exc:
            raise MigrationError(
                f"migration {step} failed at statement {n} of {len(statements)} and is not recorded "
                f"(the steps before it are): {exc}"
            ) from exc


def _row(step: Step, revision: int) -> dict:
    return {
        "version": step.migration.version,
        "name": step.migration.name,
        "checksum": step.migration.checksum,
        "action": step.action,
        "applied_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],
        "revision": revision,
    }


def _versions(steps: Sequence[Step]) -> str:
    return ", ".join(str(s.migration.version) for s in steps)


async def status(
    warehouse: Warehouse, migrations: Sequence[Migration] | None = None, cluster: Cluster | None = None
) -> dict:
    """Each migration's state (applied, adoptable, pending; unknown for an applied version this code lacks)
    and what would refuse a migration. Changes nothing."""
    state = await read_state(warehouse, migrations, _cluster_of(warehouse, cluster))
    adoptable = {m.version for m in state.adoptable}
    rows = []
    for migration in state.migrations:
        recorded = state.recorded.get(migration.version)
        applied = recorded is not None and recorded.applied
        row = {"version": migration.version, "name": migration.name}
        if applied:
            checksum = "ok" if recorded.checksum == migration.checksum else "mismatch"
            row |= {"state": "applied", "applied_at": recorded.applied_at, "adopted": recorded.action == ADOPT,
                    "checksum": checksum}  # fmt: skip
        elif migration.version in adoptable:
            row |= {"state": "adoptable"}  # present before the log: the next migrate records it without running it
        else:
            row |= {"state": "pending"}
        rows.append(row | {"reversible": migration.down is not None})
    for version, recorded in sorted(state.recorded.items()):
        if version > state.latest and recorded.applied:
            rows.append({"version": version, "name": recorded.name, "state": "unknown",
                         "applied_at": recorded.applied_at})  # fmt: skip
    pending = [m.version for m in state.migrations if m.version not in state.applied]
    return {"version": state.version, "latest": state.latest, "pending": pending, "migrations": rows,
            "problems": state.problems()}  # fmt: skip
