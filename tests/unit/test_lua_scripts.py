"""Every Lua script is read through one loader, which takes in the helpers scripts share."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

import hookbus
from hookbus.bus import lua

PACKAGE = Path(hookbus.__file__).parent
#: Helpers that scripts take in; not run alone.
HELPERS = {"stream_ids.lua"}


def shipped_scripts() -> list[tuple[str, str]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.lua")):
        if path.name in HELPERS:
            continue
        package = ".".join(path.parent.relative_to(PACKAGE.parent).parts)
        found.append((package, path.name))
    return found


@pytest.mark.parametrize(("package", "name"), shipped_scripts())
def test_every_shipped_script_loads_with_its_helpers_taken_in(package: str, name: str) -> None:
    found = lua.script(package, name)
    assert not [line for line in found.text.splitlines() if line.startswith(lua.INCLUDE)]
    assert found.sha == hashlib.sha1(found.text.encode()).hexdigest()


def test_a_script_that_includes_the_stream_id_helpers_gets_their_text() -> None:
    text = lua.source("hookbus.workers.fleet", "stream_trim.lua")
    helpers = (PACKAGE / "bus" / "stream_ids.lua").read_text("utf-8")
    assert helpers in text
    assert text.count("local function parse(id)") == 1


def test_an_include_of_a_helper_that_is_not_shipped_names_the_script_and_the_fix() -> None:
    with pytest.raises(lua.UnknownInclude, match=r"a\.lua includes 'nope'.*--#include"):
        lua._expand("a.lua", "--#include nope\nreturn 1\n")


def test_no_module_but_the_loader_reads_a_lua_file() -> None:
    reads = re.compile(r"\.lua[\"'].*read_text|read_text.*\.lua|joinpath\([^)]*\.lua")
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "lua.py" and reads.search(path.read_text("utf-8"))
    ]
    assert offenders == []
