"""Which way imports go (docs/architecture.md, the package map): each layer imports only the layers beneath it.

    schemas/            contracts: nothing of ours
    rewards/domain      pure rules: schemas
    rewards/ports       the engines' interfaces: domain, schemas
    rewards/settings, rewards/logging, rewards/stages (the stage histograms): nothing of ours
    rewards/adapters    the engines: ports, domain, settings, logging, schemas
    rewards/web         HTTP plumbing shared by the two APIs: ports, domain, settings, logging, schemas
    ingest_api, query_api, stream_workers: web (the APIs), ports, domain, settings, logging, schemas; never each other
    runtime/            the composition root (wiring, serve, the production apps, the commands): anything

The shared library (rewards/) imports no service package nor the composition root: its command line
(rewards/cli.py) gets its commands through entry points, and rewards/devengines (local engines for tests and
benchmarks) only the settings.

One exception, named here: the workers read the `dedup_ids` table they write through rewards.adapters.dedup_archive.
Imports inside functions count too."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = ("schemas", "rewards", "ingest_api", "query_api", "stream_workers", "runtime")
BASE = {"rewards.domain", "rewards.ports", "rewards.settings", "rewards.logging", "rewards.stages", "schemas"}
ALLOWED = {
    "schemas": set(),
    "rewards.domain": {"schemas"},
    "rewards.ports": {"rewards.domain", "schemas"},
    "rewards.settings": set(),
    "rewards.logging": set(),
    "rewards.stages": set(),
    "rewards.adapters": BASE,
    "rewards.web": BASE,
    "ingest_api": BASE | {"rewards.web"},
    "query_api": BASE | {"rewards.web"},
    "stream_workers": BASE | {"rewards.adapters.dedup_archive"},
    "rewards.cli": set(),
    "rewards.__main__": {"rewards.cli"},
    "rewards.devengines": {"rewards.settings", "rewards.logging"},
    "runtime": {"schemas", "rewards", "ingest_api", "query_api", "stream_workers"},
}
SERVICES = ("ingest_api", "query_api", "stream_workers", "runtime")


def layer(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "rewards" and len(parts) > 1 else parts[0]


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] in OURS}


def is_allowed(target: str, allowed: set[str]) -> bool:
    return any(target == a or target.startswith(a + ".") for a in allowed)


def modules():
    for package in OURS:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            if layer(module) in ALLOWED:
                yield module, path


# Every module's imports, read once at collection, before any test runs: on CPython 3.11 (3.11.7 here), ast.parse
# can raise "SystemError: AST constructor recursion depth mismatch" late in a session whose earlier tests drove deep
# recursions (a bug of its recursion-depth bookkeeping, python/cpython#106905 and kin): seen once in make test.
IMPORTS = {module: imports_of(path) for module, path in modules()}


@pytest.mark.parametrize(("module", "path"), list(modules()), ids=lambda v: v if isinstance(v, str) else "")
def test_imports_go_down_the_layers(module, path):
    own = layer(module)
    wrong = sorted(
        target
        for target in IMPORTS[module]
        if layer(target) != own and not is_allowed(target, ALLOWED[own]) and not is_allowed(layer(target), ALLOWED[own])
    )
    assert not wrong, f"{module} ({own}) imports {wrong}; it may import {sorted(ALLOWED[own])}"


def test_the_shared_library_imports_no_service():
    """Nothing under rewards/ imports a service package or the composition root, whatever its layer."""
    wrong = {
        module: sorted(t for t in targets if t.split(".")[0] in SERVICES)
        for module, targets in IMPORTS.items()
        if module.startswith("rewards.")
    }
    assert not {module: targets for module, targets in wrong.items() if targets}


def test_every_package_of_rewards_is_placed():
    """A new module under rewards/ must be put in a layer (ALLOWED); the composition root is runtime/, not here."""
    placed = set(ALLOWED) | {"rewards.__init__"}
    found = {layer(".".join(p.relative_to(ROOT).with_suffix("").parts)) for p in (ROOT / "rewards").rglob("*.py")}
    assert found <= placed, f"not in any layer: {sorted(found - placed)}"
