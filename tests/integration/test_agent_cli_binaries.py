"""The real Gemini CLI and Codex binaries, offline, on the fleet.

Each CLI (from the npm registry, pinned in :mod:`tests.integration.agent_clis`) runs headless
against a local fake of its model API that asks for one shell call per session, after
``hookbus gemini-cli install`` / ``hookbus codex install`` wrote its hooks into a fresh
``$HOME``. A chain worker serves the example hooks, unchanged (they are written against the
canonical ``Bash``; Gemini's ``run_shell_command`` and Codex's shell arrive as that):

* a guarded call (``cat deploy/prod.env``, refused by the example secret-file-guard) is
  blocked through the bus: the deny is in the decision log and the fleet's reason is what
  the model gets back;
* a harmless call runs, and its after-tool event reaches the event stream;
* with Redis unreachable, or hookbus unable even to start, a call is still blocked;
* Gemini CLI with ``GITHUB_SHA`` set (hook environment stripped to PATH and HOME) still
  reaches the fleet through ``~/.config/hookbus/hookbus.toml``;
* Codex runs the hooks without ``--dangerously-bypass-hook-trust``: the installer recorded
  them as trusted the way Codex does.

A machine without npm or the registry fails these tests (``HOOKBUS_GEMINI_BIN`` /
``HOOKBUS_CODEX_BIN`` name installed binaries instead).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hookbus.bus import keys
from hookbus.bus.wire import Event, decode
from tests.decision_log_helpers import last_deny
from tests.integration import agent_clis
from tests.integration.fake_codex_model import FakeCodexModel
from tests.integration.fake_codex_model import serve as serve_codex
from tests.integration.fake_gemini import FakeGemini
from tests.integration.fake_gemini import serve as serve_gemini
from tests.integration.test_blocking_bus import wait_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "hooks"
HOOKBUS = [sys.executable, "-m", "hookbus"]
SECRET = "cat deploy/prod.env"
TOUCH = "echo ran > ran.txt"
UNREACHABLE = "redis://127.0.0.1:1/0"

pytestmark = pytest.mark.slow


def _binary(cli: str) -> Path:
    try:
        return agent_clis.binary(cli)
    except agent_clis.BinaryMissing as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def gemini_bin() -> Path:
    return _binary("gemini")


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    return _binary("codex")


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


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    (project / "deploy").mkdir(parents=True)
    (project / "deploy" / "prod.env").write_text("DB_PASSWORD=hunter2\n")
    return home, project


def _env(url: str, ns: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOOKBUS_", "GITHUB_"))}
    return dict(env, HOOKBUS_REDIS_URL=url, HOOKBUS_NAMESPACE=ns)


def _install(cli: str, home: Path, *args: str) -> str:
    done = subprocess.run(
        [*HOOKBUS, cli, "install", "--scope", "user", *args],
        env=dict(os.environ, HOME=str(home), CODEX_HOME=str(home / ".codex"), PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _last_deny(client: redis.Redis, ns: str) -> str:
    return last_deny(client, ns)


def _after_tool(client: redis.Redis, ns: str) -> list[Event]:
    events = [decode(f[b"e"], Event) for _, f in client.xrange(keys.events(ns))]
    return [e for e in events if e.kind == "PostToolUse"]


def _gemini(
    gemini: Path, home: Path, project: Path, env: dict[str, str], command: str
) -> tuple[FakeGemini, str]:
    model = FakeGemini([("run_shell_command", {"command": command, "description": "run it"})])
    with serve_gemini(model) as url:
        done = agent_clis.run_gemini(gemini, base_url=url, home=home, project=project, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    (text,) = model.result_texts()
    return model, text


def _codex(
    codex: Path, home: Path, project: Path, env: dict[str, str], command: str
) -> tuple[FakeCodexModel, str]:
    model = FakeCodexModel([command])
    with serve_codex(model) as url:
        done = agent_clis.run_codex(codex, base_url=url, home=home, project=project, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    (text,) = model.result_texts()
    return model, text


def test_real_gemini_cli_is_guarded_by_the_fleet(
    gemini_bin: Path,
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    chain_worker: None,
    tmp_path: Path,
) -> None:
    home, project = _dirs(tmp_path)
    agent_clis.gemini_settings(home)
    _install("gemini-cli", home)
    env = _env(real_redis_url, namespace)

    _, text = _gemini(gemini_bin, home, project, env, SECRET)
    reason = _last_deny(real_redis, namespace)
    assert reason.startswith("refused: the call touches a secret file (deploy/prod.env)")
    assert reason in text
    assert "hunter2" not in text

    _, text = _gemini(gemini_bin, home, project, env, "echo hello-from-gemini")
    assert "hello-from-gemini" in text
    (after,) = _after_tool(real_redis, namespace)
    assert after.payload["tool_name"] == "Bash"
    assert after.payload["harness_tool_name"] == "run_shell_command"
    assert after.payload["tool_input"]["command"] == "echo hello-from-gemini"
    assert after.meta["harness"] == "gemini-cli"


def test_real_gemini_cli_blocks_a_guarded_call_with_redis_unreachable(
    gemini_bin: Path, tmp_path: Path
) -> None:
    home, project = _dirs(tmp_path)
    agent_clis.gemini_settings(home)
    _install("gemini-cli", home)
    _, text = _gemini(gemini_bin, home, project, _env(UNREACHABLE, "nowhere"), TOUCH)
    assert f"hookbus is unavailable (cannot reach Redis at {UNREACHABLE}" in text
    assert not (project / "ran.txt").exists()


def test_real_gemini_cli_blocks_a_guarded_call_when_hookbus_cannot_even_start(
    gemini_bin: Path, tmp_path: Path
) -> None:
    home, project = _dirs(tmp_path)
    agent_clis.gemini_settings(home)
    # the guard alone: with every event installed, the failing BeforeAgent hook already
    # ends the turn before the model is asked (nothing runs either way)
    _install(
        "gemini-cli", home, "--command", str(tmp_path / "no-such-hookbus"), "--events", "BeforeTool"
    )
    _, text = _gemini(gemini_bin, home, project, _env(UNREACHABLE, "x"), TOUCH)
    assert "hookbus gemini-cli hook could not run" in text
    assert not (project / "ran.txt").exists()


def test_real_gemini_cli_with_github_sha_finds_the_fleet_through_the_user_config(
    gemini_bin: Path,
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    chain_worker: None,
    tmp_path: Path,
) -> None:
    home, project = _dirs(tmp_path)
    agent_clis.gemini_settings(home)
    _install("gemini-cli", home)
    config = home / ".config" / "hookbus" / "hookbus.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'redis_url = "{real_redis_url}"\nnamespace = "{namespace}"\n')
    # the variables below never reach the hook: Gemini CLI strips them under GITHUB_SHA
    env = dict(_env(UNREACHABLE, "elsewhere"), GITHUB_SHA="0" * 40)
    _, text = _gemini(gemini_bin, home, project, env, SECRET)
    reason = _last_deny(real_redis, namespace)
    assert reason.startswith("refused: the call touches a secret file")
    assert reason in text


def test_real_codex_is_guarded_by_the_fleet_with_the_hooks_trusted_by_the_installer(
    codex_bin: Path,
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    chain_worker: None,
    tmp_path: Path,
) -> None:
    home, project = _dirs(tmp_path)
    _install("codex", home)
    assert "trusted_hash" in (home / ".codex" / "config.toml").read_text()
    env = _env(real_redis_url, namespace)

    _, text = _codex(codex_bin, home, project, env, SECRET)
    reason = _last_deny(real_redis, namespace)
    assert reason.startswith("refused: the call touches a secret file (deploy/prod.env)")
    assert reason in text
    assert "hunter2" not in text

    _, text = _codex(codex_bin, home, project, env, "echo hello-from-codex")
    assert "hello-from-codex" in text
    (after,) = _after_tool(real_redis, namespace)
    assert after.payload["tool_name"] == "Bash"
    assert after.payload["tool_input"]["command"] == "echo hello-from-codex"
    assert after.meta["harness"] == "codex"


def test_real_codex_blocks_a_guarded_call_with_redis_unreachable(
    codex_bin: Path, tmp_path: Path
) -> None:
    home, project = _dirs(tmp_path)
    _install("codex", home)
    _, text = _codex(codex_bin, home, project, _env(UNREACHABLE, "nowhere"), TOUCH)
    assert f"hookbus is unavailable (cannot reach Redis at {UNREACHABLE}" in text
    assert not (project / "ran.txt").exists()


def test_real_codex_blocks_a_guarded_call_when_hookbus_cannot_even_start(
    codex_bin: Path, tmp_path: Path
) -> None:
    home, project = _dirs(tmp_path)
    _install(
        "codex", home, "--command", str(tmp_path / "no-such-hookbus"), "--events", "PreToolUse"
    )
    _, text = _codex(codex_bin, home, project, _env(UNREACHABLE, "x"), TOUCH)
    assert "hookbus codex hook could not run" in text
    assert not (project / "ran.txt").exists()


def test_real_codex_skips_a_hook_whose_trust_record_does_not_match(
    codex_bin: Path, tmp_path: Path
) -> None:
    # the control: the same install with its trust records spoilt lets the call run, so
    # the blocks above are the trusted hooks at work
    home, project = _dirs(tmp_path)
    _install("codex", home)
    config = home / ".codex" / "config.toml"
    config.write_text(
        config.read_text().replace('trusted_hash = "sha256:', 'trusted_hash = "sha256:0')
    )
    _codex(codex_bin, home, project, _env(UNREACHABLE, "nowhere"), TOUCH)
    assert (project / "ran.txt").read_text() == "ran\n"


def test_real_codex_runs_a_trusted_projects_hooks_installed_with_scope_project(
    codex_bin: Path, tmp_path: Path
) -> None:
    # Codex reads a project's trust records from the user's config only: the installer
    # writes them there (the project itself is trusted by its person, as here)
    home, project = _dirs(tmp_path)
    user = home / ".codex" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text(f'[projects."{project}"]\ntrust_level = "trusted"\n')
    done = subprocess.run(
        [*HOOKBUS, "codex", "install", "--scope", "project", "--events", "PreToolUse"],
        env=dict(os.environ, HOME=str(home), CODEX_HOME=str(home / ".codex"), PYTHONPATH=str(ROOT)),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "trusted_hash" in user.read_text()
    assert "trusted_hash" not in (project / ".codex" / "config.toml").read_text()
    _, text = _codex(codex_bin, home, project, _env(UNREACHABLE, "nowhere"), TOUCH)
    assert f"hookbus is unavailable (cannot reach Redis at {UNREACHABLE}" in text
    assert not (project / "ran.txt").exists()


def test_real_gemini_cli_runs_a_trusted_projects_hooks_installed_with_scope_project(
    gemini_bin: Path, tmp_path: Path
) -> None:
    home, project = _dirs(tmp_path)
    agent_clis.gemini_settings(home)  # the user's settings: auth only, no hooks
    done = subprocess.run(
        [*HOOKBUS, "gemini-cli", "install", "--scope", "project"],
        env=dict(os.environ, HOME=str(home), PYTHONPATH=str(ROOT)),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "hooks" not in json.loads((home / ".gemini" / "settings.json").read_text())
    _, text = _gemini(gemini_bin, home, project, _env(UNREACHABLE, "nowhere"), TOUCH)
    assert f"hookbus is unavailable (cannot reach Redis at {UNREACHABLE}" in text
    assert not (project / "ran.txt").exists()
