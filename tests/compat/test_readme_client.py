"""docs/client.md, "Using the published client": its Node snippet, pasted as it is, runs against `rewards serve`
and prints what it promises (the referred user's status)."""

import json
import os
import re
import subprocess
import uuid
from pathlib import Path

from tests.compat.driver import ensure_sdk
from tests.support.harness import Admin

CLIENT_DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"


def snippet() -> str:
    section = CLIENT_DOC.read_text().split("## Using the published client", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```js\n(.*?)```", section, re.S)
    return code


def test_the_readme_snippet_refers_bob_through_the_client(embedded_server):
    admin = Admin(embedded_server)
    project = admin.project()
    key = admin.key(project, "service_role")
    node_modules = ensure_sdk()
    script = node_modules.parent / f"readme-{uuid.uuid4().hex}.mjs"  # beside node_modules: `@fuul/sdk` resolves
    script.write_text(snippet())
    try:
        env = {**os.environ, "REWARDS_KEY": key, "REWARDS_URL": f"{embedded_server.url}/api/v1"}
        done = subprocess.run(["node", str(script)], env=env, capture_output=True, text=True, timeout=60, check=False)
    finally:
        script.unlink()
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout.strip().splitlines()[-1])
    assert status["referred"] is True
    assert status["referrer_identifier"] == "0x00000000000000000000000000000000000a11ce"
    assert status["referrer_identifier_type"] == "evm_address" and status["code"]
