"""Helpers shared by ``test_agent_cli_binaries.py`` and the test modules that
need the same set-up (a test module never imports another)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hookbus.bus import keys
from hookbus.bus.wire import Event, decode
from tests.blocking_helpers import wait_for
from tests.integration import agent_clis
from tests.integration.fake_codex_model import FakeCodexModel
from tests.integration.fake_codex_model import serve as serve_codex
from tests.integration.fake_gemini import FakeGemini
from tests.integration.fake_gemini import serve as serve_gemini

ROOT = Path(__file__).resolve().parents[1]


EXAMPLES = ROOT / "examples" / "hooks"


HOOKBUS = [sys.executable, "-m", "hookbus"]


SECRET = "cat deploy/prod.env"


TOUCH = "echo ran > ran.txt"


UNREACHABLE = "redis://127.0.0.1:1/0"


def cli_binary(cli: str) -> Path:
    """The CLI's binary, or a skip that says why it cannot be had here (npm or its registry
    missing); with ``$HOOKBUS_REQUIRE_AGENT_CLIS`` set, as CI does, a failure instead."""
    try:
        found, why = agent_clis.binary_or_skip_reason(cli)
    except agent_clis.BinaryMissing as exc:
        pytest.fail(str(exc))
    if found is None:
        pytest.skip(why)
    return found


@pytest.fixture(scope="session")
def gemini_bin() -> Path:
    return cli_binary("gemini")


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    return cli_binary("codex")


@pytest.fixture(scope="session")
def cline_bin() -> Path:
    return cli_binary("cline")


@pytest.fixture
def chain_worker(real_redis_url: str, real_redis: redis.Redis, namespace: str) -> Iterator[None]:
    env = dict(os.environ, HOOKBUS_REDIS_URL=real_redis_url, HOOKBUS_NAMESPACE=namespace)
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.Popen(
        [*HOOKBUS, "worker", "--role", "chain", "--hooks-dir", str(EXAMPLES)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: real_redis.hlen(keys.workers(namespace)) > 0, what="a heartbeat")
        yield
    finally:
        proc.terminate()
        proc.wait(15)


def cli_dirs(tmp_path: Path) -> tuple[Path, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    (project / "deploy").mkdir(parents=True)
    (project / "deploy" / "prod.env").write_text("DB_PASSWORD=hunter2\n")
    return home, project


def agent_env(url: str, ns: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOOKBUS_", "GITHUB_"))}
    return dict(env, HOOKBUS_REDIS_URL=url, HOOKBUS_NAMESPACE=ns)


def install_cli(cli: str, home: Path, *args: str) -> str:
    done = subprocess.run(
        [*HOOKBUS, cli, "install", "--scope", "user", *args],
        env=dict(os.environ, HOME=str(home), CODEX_HOME=str(home / ".codex"), PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def last_deny(client: redis.Redis, ns: str) -> str:
    """The newest deny's reason, single or batch records alike."""
    from tests.decision_log_helpers import last_deny as newest_deny

    return newest_deny(client, ns)


def after_tool_events(client: redis.Redis, ns: str) -> list[Event]:
    events = [decode(f[b"e"], Event) for _, f in client.xrange(keys.events(ns))]
    return [e for e in events if e.kind == "PostToolUse"]


def gemini_run(
    gemini: Path, home: Path, project: Path, env: dict[str, str], command: str
) -> tuple[FakeGemini, str]:
    model = FakeGemini([("run_shell_command", {"command": command, "description": "run it"})])
    with serve_gemini(model) as url:
        done = agent_clis.run_gemini(gemini, base_url=url, home=home, project=project, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    (text,) = model.result_texts()
    return model, text


def codex_run(
    codex: Path, home: Path, project: Path, env: dict[str, str], command: str
) -> tuple[FakeCodexModel, str]:
    model = FakeCodexModel([command])
    with serve_codex(model) as url:
        done = agent_clis.run_codex(codex, base_url=url, home=home, project=project, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    (text,) = model.result_texts()
    return model, text
