"""The Redis state store's Lua scripts are files (rewards/adapters/production/lua), one per script, read and
assembled by redis_scripts.source: every script the store registers has its file, every file is a script or an
included helper, and what Redis receives is self-contained. (What the scripts do: tests/contract on Redis.)"""

import re

from rewards.adapters.production.redis_scripts import LUA, Scripts, source


def test_every_script_has_its_file_and_every_file_is_used():
    scripts = set(Scripts.__dataclass_fields__)
    assert {path.stem for path in LUA.glob("*.lua")} == scripts
    included = {m for name in scripts for m in re.findall(r"--#include (\S+)", (LUA / f"{name}.lua").read_text())}
    assert {f"include/{path.name}" for path in (LUA / "include").glob("*.lua")} == included | {
        m for helper in included for m in re.findall(r"--#include (\S+)", (LUA / helper).read_text())
    }


def test_a_script_is_sent_whole_with_each_helper_once():
    for name in Scripts.__dataclass_fields__:
        text = source(name)
        assert "--#include" not in text, name
        assert text.count("local function now_ms()") <= 1, name
    assert "local function chain(" in source("use_code") and "local function outbox_add(" in source("use_code")
