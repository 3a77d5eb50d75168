"""Importing hookbus, and the producer SDK path, must stay cheap and side-effect free: an
agent pays for it on every event."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("typer", "rich", "rq", "pydantic", "pydantic_settings")


def modules_after(code: str) -> set[str]:
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, timeout=60
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_import_hookbus_imports_nothing_heavy() -> None:
    modules = modules_after("import hookbus")
    assert heavy_in(modules) == []
    assert "redis" not in modules


def test_the_wire_types_and_config_import_nothing_heavy() -> None:
    code = (
        "from hookbus import Event, Decision\n"
        "from hookbus.bus.settings.loader import load_settings\n"
        "load_settings(environ={})\n"
    )
    assert heavy_in(modules_after(code)) == []


def test_the_producer_sdk_path_imports_neither_typer_rich_rq_nor_pydantic() -> None:
    code = "import hookbus\nbus = hookbus.HookBus.from_url('redis://127.0.0.1:1/0')\nbus.close()\n"
    assert heavy_in(modules_after(code)) == []


def test_importing_does_not_connect_or_read_config() -> None:
    code = (
        "import socket, builtins\n"
        "opened = []\n"
        "real_open = builtins.open\n"
        "def spy(f, *a, **k):\n"
        "    opened.append(str(f))\n"
        "    return real_open(f, *a, **k)\n"
        "builtins.open = spy\n"
        "def no_connect(*a, **k):\n"
        "    raise AssertionError('connected at import')\n"
        "socket.socket.connect = no_connect\n"
        "import hookbus, hookbus.bus.wire, hookbus.bus.settings.loader, hookbus.bus.kinds\n"
        "assert not [f for f in opened if f.endswith('hookbus.toml')], opened\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_write_hook_is_reachable_from_the_authoring_package() -> None:
    import hookbus.authoring
    from hookbus.authoring.write import write_hook

    assert hookbus.authoring.write_hook is write_hook


def test_the_catalogue_does_not_pull_in_the_audit_or_pydantic() -> None:
    modules = modules_after("from hookbus.bus.kinds import DEFAULT_CATALOGUE")
    assert "hookbus.authoring.write" not in modules
    assert heavy_in(modules) == []


def test_the_shared_event_encoder_loads_no_redis_py() -> None:
    # the lean `hookbus publish` encodes with reqrep.encode_event: it must stay light
    code = (
        "from hookbus.bus.reqrep import encode_event\n"
        "from hookbus.bus.wire import Event\n"
        "encode_event(Event(kind='Stop'), 1024)\n"
    )
    modules = modules_after(code)
    assert "hookbus.bus.reqrep" in modules
    assert sorted(m for m in modules if m.split(".")[0] in ("redis", "hiredis")) == []
    assert heavy_in(modules) == []


def test_the_shared_lean_modules_import_the_standard_library_and_hookbus_only() -> None:
    # liveness, ids and the RESP encoder/client run in the per-event hook and in the SDK
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import hookbus.bus.policy.liveness, hookbus.bus.ids\n"
        "import hookbus.bus.resp, hookbus.bus.resp.cluster\n"
        "new = set(sys.modules) - before\n"
        "import json\n"
        "print(json.dumps(sorted(new)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60
    )
    new = json.loads(out.stdout.strip().splitlines()[-1])
    foreign = [m for m in new if m.split(".")[0] not in ("hookbus", *sys.stdlib_module_names)]
    assert foreign == []
    assert "typing" not in new
    assert "msgspec" not in new
