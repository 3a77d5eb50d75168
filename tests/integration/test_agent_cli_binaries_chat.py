"""The real GitHub Copilot CLI and Qwen Code binaries, offline, on the fleet.

Each CLI (from the npm registry, pinned in :mod:`tests.integration.agent_clis`) runs headless
against a local fake Chat Completions endpoint (:mod:`tests.integration.fake_openai_chat`)
that asks for one shell call per session, after ``hookbus copilot install`` / ``hookbus
qwen-code install`` wrote its hooks into a fresh ``$HOME``. A chain worker serves the example
hooks, unchanged (written against the canonical ``Bash``; Copilot's ``bash`` and Qwen Code's
``run_shell_command`` arrive as that):

* a guarded call (``cat deploy/prod.env``, refused by the example secret-file-guard) is
  blocked through the bus: the deny is in the decision log and the fleet's reason is what
  the model gets back in its next request;
* a harmless call runs, and its after-tool event reaches the event stream;
* with Redis unreachable, a call is still blocked.

Where npm or the registry cannot be reached these tests are skipped, each saying why (the
fixture tests of ``tests/unit/test_harness_copilot_qwen.py`` and
``tests/integration/test_agent_cli_hooks.py`` run everywhere).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus.bus import keys
from hookbus.bus.decision_batch import logged
from hookbus.bus.wire import Decision, Event, decode
from tests.agent_cli_helpers import agent_env, cli_binary, cli_dirs
from tests.blocking_helpers import wait_for
from tests.integration import agent_clis
from tests.integration.fake_openai_chat import FakeChatModel, serve

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "hooks"
HOOKBUS = [sys.executable, "-m", "hookbus"]
SECRET = "cat deploy/prod.env"
TOUCH = "echo ran > ran.txt"
UNREACHABLE = "redis://127.0.0.1:1/0"
#: adapter row -> the npm CLI of agent_clis
CLIS = {"copilot": "copilot", "qwen-code": "qwen"}

pytestmark = [pytest.mark.slow, pytest.mark.agent_cli]


@pytest.fixture(scope="module", params=sorted(CLIS))
def cli(request: pytest.FixtureRequest) -> tuple[str, Path]:
    name = str(request.param)
    return name, cli_binary(CLIS[name])


def _install(name: str, home: Path) -> None:
    done = subprocess.run(
        [*HOOKBUS, name, "install", "--scope", "user"],
        env=dict(os.environ, HOME=str(home), PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def _session(
    cli: tuple[str, Path], home: Path, project: Path, env: dict[str, str], cmd: str
) -> str:
    """One headless session asking for ``cmd``; what the model got back for it."""
    name, binary = cli
    model = FakeChatModel([cmd])
    run = agent_clis.run_copilot if name == "copilot" else agent_clis.run_qwen
    with serve(model) as url:
        done = run(binary, base_url=url, home=home, project=project, env=env)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    (text,) = model.result_texts()
    return text


def _last_deny(client: redis.Redis, ns: str) -> str:
    for record in reversed(logged(client, keys.decisions(ns))):
        if b"d" not in record:
            continue
        decision = decode(record[b"d"], Decision)
        if decision.outcome == "deny" and decision.reason:
            return decision.reason
    pytest.fail("no deny in the decision log")


def _after_tool(client: redis.Redis, ns: str) -> list[Event]:
    entries: Any = client.xrange(keys.events(ns))
    events = [decode(fields[b"e"], Event) for _, fields in entries]
    return [e for e in events if e.kind == "PostToolUse"]


def test_a_guarded_call_is_blocked_through_the_bus_and_a_harmless_one_runs(
    cli: tuple[str, Path],
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    chain_worker: None,
    tmp_path: Path,
) -> None:
    name = cli[0]
    home, project = cli_dirs(tmp_path)
    _install(name, home)
    env = agent_env(real_redis_url, namespace)

    text = _session(cli, home, project, env, SECRET)
    wait_for(
        lambda: any(b"d" in r for r in logged(real_redis, keys.decisions(namespace))), what="a log"
    )
    reason = _last_deny(real_redis, namespace)
    assert reason.startswith("refused: the call touches a secret file (deploy/prod.env)")
    assert reason in text
    assert "hunter2" not in text

    text = _session(cli, home, project, env, f"echo hello-from-{name}")
    assert f"hello-from-{name}" in text
    wait_for(lambda: _after_tool(real_redis, namespace), what="the after-tool event")
    (after,) = _after_tool(real_redis, namespace)
    assert after.payload["tool_name"] == "Bash"
    assert after.payload["tool_input"]["command"] == f"echo hello-from-{name}"
    assert after.meta["harness"] == name


def test_a_guarded_call_is_blocked_with_redis_unreachable(
    cli: tuple[str, Path], tmp_path: Path
) -> None:
    home, project = cli_dirs(tmp_path)
    _install(cli[0], home)
    text = _session(cli, home, project, agent_env(UNREACHABLE, "nowhere"), TOUCH)
    assert f"hookbus is unavailable (cannot reach Redis at {UNREACHABLE}" in text
    assert not (project / "ran.txt").exists()
