"""Drive the published JavaScript client (`@fuul/sdk`, pinned in tests/compat/package.json) from Python tests.

`ensure_sdk()` installs the pinned package once per lock file: `npm ci` from tests/compat/package-lock.json into
`.cache/npm-compat/<first 16 hex digits of sha256(package.json + package-lock.json)>/node_modules`, reused while
that folder exists (a new pin or lock makes a new folder; old ones can be deleted at any time). The install runs in
a temporary sibling folder renamed into place when complete, so an interrupted or concurrent install never leaves a
half-filled cache behind. `REWARDS_NPM_COMPAT_CACHE` moves the cache root. The cache root carries its own
`.gitignore` (`*`), so nothing in it is ever shown to git.

Without node/npm, or when `npm ci` fails, the tests that need the client skip, except under `CI=true`, where the
failure is raised: CI never passes by skipping the client.

`run_calls(base_url, api_key, calls)` runs `node tests/compat/run.mjs` on one scenario and returns one dict per
call: `{"ok": True, "value": ...}` or `{"ok": False, "error": {"name", "message", "status"?, "body"?}}`
(run.mjs says what each field holds). `base_url` includes the `/api/v1` prefix, as `Fuul.init({baseApiUrl})` wants.
"""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

COMPAT_DIR = Path(__file__).resolve().parent
REPO_ROOT = COMPAT_DIR.parent.parent
RUN_MJS = COMPAT_DIR / "run.mjs"
PACKAGE = "@fuul/sdk"
INSTALL_TIMEOUT_S = 300


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _unavailable(reason: str):
    """Fail loudly under CI, skip elsewhere."""
    if _in_ci():
        raise RuntimeError(f"@fuul/sdk compatibility harness: {reason}")
    pytest.skip(f"@fuul/sdk compatibility harness: {reason}")


def cache_root() -> Path:
    root = Path(os.environ.get("REWARDS_NPM_COMPAT_CACHE", REPO_ROOT / ".cache" / "npm-compat"))
    root.mkdir(parents=True, exist_ok=True)
    ignore = root / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# Written by tests/compat/driver.py: an install cache, never committed.\n*\n")
    return root


def lock_hash() -> str:
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update(name.encode() + b"\0" + (COMPAT_DIR / name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def pinned_version() -> str:
    return json.loads((COMPAT_DIR / "package.json").read_text())["dependencies"][PACKAGE]


def _installed_version(node_modules: Path) -> str | None:
    manifest = node_modules.joinpath(*PACKAGE.split("/"), "package.json")
    try:
        return json.loads(manifest.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def ensure_sdk() -> Path:
    """The node_modules folder holding the pinned client, installed with `npm ci` if not cached yet."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            _unavailable(f"`{tool}` is not on PATH")
    target = cache_root() / lock_hash()
    node_modules = target / "node_modules"
    if _installed_version(node_modules) == pinned_version():
        return node_modules
    staging = Path(tempfile.mkdtemp(prefix=f"{target.name}.", suffix=".installing", dir=target.parent))
    try:
        for name in ("package.json", "package-lock.json"):
            shutil.copy2(COMPAT_DIR / name, staging / name)
        command = ["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"]
        try:
            done = subprocess.run(
                command, cwd=staging, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            _unavailable(f"`{' '.join(command)}` took more than {INSTALL_TIMEOUT_S}s")
        if done.returncode != 0:
            _unavailable(f"`{' '.join(command)}` exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        if _installed_version(staging / "node_modules") != pinned_version():
            _unavailable(f"`npm ci` did not install {PACKAGE}@{pinned_version()}")
        try:
            staging.rename(target)  # atomic; fails when another process finished first (or a stale folder is there)
        except OSError:
            if _installed_version(node_modules) != pinned_version():
                shutil.rmtree(target, ignore_errors=True)  # a stale, incomplete folder: replace it
                staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return node_modules


def run_calls(
    base_url: str,
    api_key: str,
    calls: list[dict],
    *,
    browser: dict | None = None,
    default_query_params: dict[str, str] | None = None,
    timeout_s: float = 120,
) -> list[dict]:
    """Run `calls` (`{"method": <a Fuul method name>, "args": [...]}`) in one node process: one Fuul.init()."""
    node_modules = ensure_sdk()
    scenario: dict = {"baseUrl": base_url, "apiKey": api_key, "calls": calls}
    if browser is not None:
        scenario["browser"] = browser
    if default_query_params is not None:
        scenario["defaultQueryParams"] = default_query_params
    env = {**os.environ, "NODE_PATH": str(node_modules), "FUUL_SDK_NODE_MODULES": str(node_modules)}
    done = subprocess.run(
        ["node", str(RUN_MJS)],
        input=json.dumps(scenario),
        cwd=node_modules.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"run.mjs exited {done.returncode}:\n{done.stderr}")
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    if len(lines) != len(calls):
        raise RuntimeError(f"run.mjs answered {len(lines)} lines for {len(calls)} calls:\n{done.stdout}\n{done.stderr}")
    return lines


def call(base_url: str, api_key: str, method: str, *args, **options) -> dict:
    """One call: `{"ok": ..., "value" | "error": ...}`."""
    return run_calls(base_url, api_key, [{"method": method, "args": list(args)}], **options)[0]
