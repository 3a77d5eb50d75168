"""The real OpenCode and Kilo CLI binaries, offline, on the fleet through hookbus's plugin.

Each CLI (from the npm registry, pinned in :mod:`tests.integration.agent_clis`) runs
``run`` headless against a local fake Chat Completions endpoint that asks for one bash call
per session (:mod:`tests.integration.opencode_clis`), after ``hookbus <cli> install``
wrote its plugin into a fresh user config folder. A chain worker serves the example hooks,
unchanged (written against the canonical ``Bash``; the CLIs' ``bash`` arrives as that):

* a guarded call (``mkfs.ext4 -q -F disk.img``, refused by the example block-destructive
  guard) is blocked through the bus: the deny is in the decision log, the fleet's reason is
  the tool result the model gets, and the disk image is untouched; the context the example
  policy-reminder adds to the prompt is in the model's system prompt;
* ``ls`` runs, and its ``tool.execute.after`` reaches the event stream as a PostToolUse;
* with Redis unreachable, the guarded call is still blocked;
* ``uninstall`` leaves the user's config folder as it was;
* the plugin run by the CLI's own runtime blocks a guarded call when the hook command hangs
  past its wait, exits non-zero or prints what is not JSON, and the installer refuses a
  plugin that does not load.

Where npm or the registry cannot be reached these tests are skipped, each saying why (the
fixture tests of ``tests/unit/test_harness_opencode.py`` run everywhere).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus.bus import keys
from hookbus.bus.decision_batch import logged
from hookbus.bus.wire import Decision, Event, decode
from hookbus.harnesses.adapters import adapter
from hookbus.harnesses.install import opencode as installer
from tests.agent_cli_helpers import agent_env, cli_binary
from tests.blocking_helpers import wait_for
from tests.integration import opencode_clis
from tests.integration.fake_openai_chat import FakeChatModel, serve

ROOT = Path(__file__).resolve().parents[2]
HOOKBUS = [sys.executable, "-m", "hookbus"]
GUARDED = "mkfs.ext4 -q -F disk.img"
UNREACHABLE = "redis://127.0.0.1:1/0"
#: hookbus's plugin in a user config folder.
PLUGIN = "plugin/hookbus.js"
#: A disk image for mkfs to format: zeros, so any write shows.
IMAGE_BYTES = 4 * 1024 * 1024

pytestmark = [pytest.mark.slow, pytest.mark.agent_cli]


@pytest.fixture(scope="module", params=sorted(opencode_clis.FLAVORS))
def cli(request: pytest.FixtureRequest) -> tuple[str, Path]:
    name = str(request.param)
    return name, cli_binary(opencode_clis.NPM_CLI[name])


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    with open(project / "disk.img", "wb") as image:
        image.truncate(IMAGE_BYTES)
    return home, project


def _hookbus(cli: tuple[str, Path], home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, **opencode_clis.xdg_env(home), PYTHONPATH=str(ROOT))
    env["PATH"] = os.pathsep.join([str(cli[1].parent), os.environ.get("PATH", "")])
    return subprocess.run(
        [*HOOKBUS, cli[0], *args, "--scope", "user", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _session(
    cli: tuple[str, Path], home: Path, project: Path, env: dict[str, str], cmd: str
) -> str:
    """One headless session asking for ``cmd``; what the model got back for it."""
    return _model_session(cli, home, project, env, cmd).result_texts()[0]


def _model_session(
    cli: tuple[str, Path], home: Path, project: Path, env: dict[str, str], cmd: str
) -> FakeChatModel:
    """One headless session asking for ``cmd``: the fake model, with what it was sent."""
    model = FakeChatModel([cmd])
    with serve(model) as url:
        opencode_clis.prepare(cli[0], home, project, url)
        done = opencode_clis.run_session(cli[0], cli[1], home=home, project=project, env=env)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    assert len(model.result_texts()) == 1, model.result_texts()
    return model


def _system_prompts(model: FakeChatModel) -> list[str]:
    return [
        str(message.get("content"))
        for body in model.requests
        if body.get("tools")
        for message in body.get("messages") or []
        if message.get("role") == "system"
    ]


def _untouched(project: Path) -> bool:
    return (project / "disk.img").read_bytes() == bytes(IMAGE_BYTES)


def _last_deny(client: redis.Redis, ns: str) -> str:
    for record in reversed(logged(client, keys.decisions(ns))):
        if b"d" not in record:
            continue
        decision = decode(record[b"d"], Decision)
        if decision.outcome == "deny" and decision.reason:
            return decision.reason
    pytest.fail("no deny in the decision log")


def _events(client: redis.Redis, ns: str, kind: str) -> list[Event]:
    entries: Any = client.xrange(keys.events(ns))
    events = [decode(fields[b"e"], Event) for _, fields in entries]
    return [e for e in events if e.kind == kind]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_guarded_call_is_blocked_through_the_bus_and_ls_runs(
    cli: tuple[str, Path],
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    chain_worker: None,
    tmp_path: Path,
) -> None:
    name = cli[0]
    home, project = _dirs(tmp_path)
    done = _hookbus(cli, home, "install")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["load_check"].startswith("loads with ")
    env = agent_env(real_redis_url, namespace)

    model = _model_session(cli, home, project, env, GUARDED)
    (text,) = model.result_texts()
    # the example policy-reminder adds context on the prompt: it joins the system prompt
    assert any("Project rules: never commit secrets" in p for p in _system_prompts(model))
    wait_for(
        lambda: any(b"d" in r for r in logged(real_redis, keys.decisions(namespace))), what="a log"
    )
    reason = _last_deny(real_redis, namespace)
    assert reason.startswith("refused: destructive command (mkfs")
    assert reason in text
    assert _untouched(project)

    text = _session(cli, home, project, env, "ls")
    assert "disk.img" in text
    wait_for(lambda: _events(real_redis, namespace, "PostToolUse"), what="the post event")
    (after,) = _events(real_redis, namespace, "PostToolUse")
    assert after.payload["tool_name"] == "Bash"
    assert after.payload["tool_input"]["command"] == "ls"
    assert after.meta["harness"] == name
    assert after.session_id is not None and after.session_id.startswith("ses_")


def test_a_guarded_call_is_blocked_with_redis_unreachable_and_uninstall_restores_the_config(
    cli: tuple[str, Path], tmp_path: Path
) -> None:
    home, project = _dirs(tmp_path)
    folder = opencode_clis.user_config_dir(cli[0], home)
    opencode_clis.preseed(cli[0], folder)
    (folder / f"{cli[0]}.json").write_text('{\n  "autoupdate": false\n}\n')
    before = _snapshot(folder)
    assert _hookbus(cli, home, "install").returncode == 0
    installed = _snapshot(folder)
    assert installed.pop(PLUGIN) is not None
    assert installed == before

    text = _session(cli, home, project, agent_env(UNREACHABLE, "nowhere"), GUARDED)
    assert f"hookbus is unavailable (cannot reach Redis at {UNREACHABLE}" in text
    assert _untouched(project)

    # the CLI itself writes to its folder during a session (Kilo adds a $schema to kilo.json)
    used = _snapshot(folder)
    done = _hookbus(cli, home, "uninstall")
    assert done.returncode == 0, done.stderr
    del used[PLUGIN]
    assert _snapshot(folder) == used
    assert not (folder / "plugin").exists()


def _plugin_hook(
    cli: tuple[str, Path], tmp_path: Path, command: str, hook: str, wait_s: float = 2
) -> tuple[str, float]:
    """Run one hook of a plugin whose points all call ``command``, in the CLI's runtime:
    ``ok`` or ``threw: <message>``, and how long it took."""
    row = adapter(cli[0])
    plugin = installer.PluginFile(row, label=row.label)
    points = plugin.points(None, command="unused", mode="command", url="")
    for point in points.values():
        point.update(command=command, wait_s=wait_s)
    path = tmp_path / "hookbus.js"
    path.write_text(plugin.render(points))
    script = (
        "(async () => {"
        "const m = await import(require('url').pathToFileURL(process.env.P).href);"
        "const hooks = await m.HookbusPlugin({});"
        "const input = {tool: 'bash', sessionID: 'ses_x', callID: 'c1'};"
        "try { await hooks[process.env.H](input, {args: {command: 'ls'}}); console.log('ok'); }"
        "catch (e) { console.log('threw: ' + e.message); }"
        "})()"
    )
    env = dict(os.environ, BUN_BE_BUN="1", P=str(path), H=hook)
    started = time.monotonic()
    done = subprocess.run(
        [str(cli[1]), "-e", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1], time.monotonic() - started


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("sleep 30", "no answer within 2 s"),
        ("exit 1", "hookbus exited 1"),
        ("echo not-json", "hookbus answered no JSON"),
        ("/nonexistent/hookbus opencode hook", "hookbus exited 127"),
    ],
)
def test_the_plugin_blocks_a_guarded_call_when_the_hook_command_fails(
    cli: tuple[str, Path], tmp_path: Path, command: str, why: str
) -> None:
    result, took = _plugin_hook(cli, tmp_path, command, "tool.execute.before")
    assert result.startswith(f"threw: hookbus is unavailable ({why}")
    assert result.endswith("blocked because this hook fails closed")
    assert took < 20


def test_the_plugin_applies_the_fleets_block_and_lets_other_points_pass_when_it_fails(
    cli: tuple[str, Path], tmp_path: Path
) -> None:
    block = 'echo \'{"block": "no mkfs here"}\''
    assert _plugin_hook(cli, tmp_path, block, "tool.execute.before")[0] == "threw: no mkfs here"
    assert _plugin_hook(cli, tmp_path, "exit 1", "tool.execute.after")[0] == "ok"


def test_the_installer_refuses_a_plugin_that_does_not_load(
    cli: tuple[str, Path], tmp_path: Path
) -> None:
    row = adapter(cli[0])
    path = tmp_path / "plugin" / "hookbus.js"
    path.parent.mkdir()
    path.write_text("export const HookbusPlugin = async () => { return { ;\n")
    env = dict(os.environ, PATH=os.pathsep.join([str(cli[1].parent), os.environ["PATH"]]))
    with pytest.raises(installer.PluginLoadError, match="does not load with"):
        installer.PluginFile(row, label=row.label).check_loads(path, env)


def test_in_http_mode_the_plugin_asks_the_gateway_and_blocks_when_it_is_down(
    cli: tuple[str, Path],
    real_redis: redis.Redis,
    namespace: str,
    chain_worker: None,
    gateway: str,
    tmp_path: Path,
) -> None:
    home, project = _dirs(tmp_path)
    done = _hookbus(cli, home, "install", "--mode", "http", "--url", gateway)
    assert done.returncode == 0, done.stderr
    # the gateway names the fleet; the session's own environment names none
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    text = _session(cli, home, project, env, GUARDED)
    assert text.startswith("refused: destructive command (mkfs")
    assert _last_deny(real_redis, namespace) in text
    assert _untouched(project)

    down = "http://127.0.0.1:1"
    assert _hookbus(cli, home, "install", "--mode", "http", "--url", down).returncode == 0
    text = _session(cli, home, project, env, GUARDED)
    assert text.startswith("hookbus is unavailable (the gateway did not answer")
    assert _untouched(project)
