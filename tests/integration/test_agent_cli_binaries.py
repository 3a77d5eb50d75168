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

Where npm or its registry cannot be reached these tests are skipped, saying why (the
captured fixtures in ``tests/fixtures`` still prove the adapters; ``HOOKBUS_GEMINI_BIN`` /
``HOOKBUS_CODEX_BIN`` name installed binaries instead); with ``HOOKBUS_REQUIRE_AGENT_CLIS``
set, as CI does, they fail instead.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import redis

from tests.agent_cli_helpers import (
    HOOKBUS,
    ROOT,
    SECRET,
    TOUCH,
    UNREACHABLE,
    after_tool_events,
    agent_env,
    cli_dirs,
    codex_run,
    gemini_run,
    install_cli,
    last_deny,
)
from tests.integration import agent_clis

pytestmark = pytest.mark.slow


def test_real_gemini_cli_is_guarded_by_the_fleet(
    gemini_bin: Path,
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    chain_worker: None,
    tmp_path: Path,
) -> None:
    home, project = cli_dirs(tmp_path)
    agent_clis.gemini_settings(home)
    install_cli("gemini-cli", home)
    env = agent_env(real_redis_url, namespace)

    _, text = gemini_run(gemini_bin, home, project, env, SECRET)
    reason = last_deny(real_redis, namespace)
    assert reason.startswith("refused: the call touches a secret file (deploy/prod.env)")
    assert reason in text
    assert "hunter2" not in text

    _, text = gemini_run(gemini_bin, home, project, env, "echo hello-from-gemini")
    assert "hello-from-gemini" in text
    (after,) = after_tool_events(real_redis, namespace)
    assert after.payload["tool_name"] == "Bash"
    assert after.payload["harness_tool_name"] == "run_shell_command"
    assert after.payload["tool_input"]["command"] == "echo hello-from-gemini"
    assert after.meta["harness"] == "gemini-cli"


def test_real_gemini_cli_blocks_a_guarded_call_with_redis_unreachable(
    gemini_bin: Path, tmp_path: Path
) -> None:
    home, project = cli_dirs(tmp_path)
    agent_clis.gemini_settings(home)
    install_cli("gemini-cli", home)
    _, text = gemini_run(gemini_bin, home, project, agent_env(UNREACHABLE, "nowhere"), TOUCH)
    assert f"hookbus is unavailable (cannot reach Redis at {UNREACHABLE}" in text
    assert not (project / "ran.txt").exists()


def test_real_gemini_cli_blocks_a_guarded_call_when_hookbus_cannot_even_start(
    gemini_bin: Path, tmp_path: Path
) -> None:
    home, project = cli_dirs(tmp_path)
    agent_clis.gemini_settings(home)
    # the guard alone: with every event installed, the failing BeforeAgent hook already
    # ends the turn before the model is asked (nothing runs either way)
    install_cli(
        "gemini-cli", home, "--command", str(tmp_path / "no-such-hookbus"), "--events", "BeforeTool"
    )
    _, text = gemini_run(gemini_bin, home, project, agent_env(UNREACHABLE, "x"), TOUCH)
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
    home, project = cli_dirs(tmp_path)
    agent_clis.gemini_settings(home)
    install_cli("gemini-cli", home)
    config = home / ".config" / "hookbus" / "hookbus.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'redis_url = "{real_redis_url}"\nnamespace = "{namespace}"\n')
    # the variables below never reach the hook: Gemini CLI strips them under GITHUB_SHA
    env = dict(agent_env(UNREACHABLE, "elsewhere"), GITHUB_SHA="0" * 40)
    _, text = gemini_run(gemini_bin, home, project, env, SECRET)
    reason = last_deny(real_redis, namespace)
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
    home, project = cli_dirs(tmp_path)
    install_cli("codex", home)
    assert "trusted_hash" in (home / ".codex" / "config.toml").read_text()
    env = agent_env(real_redis_url, namespace)

    _, text = codex_run(codex_bin, home, project, env, SECRET)
    reason = last_deny(real_redis, namespace)
    assert reason.startswith("refused: the call touches a secret file (deploy/prod.env)")
    assert reason in text
    assert "hunter2" not in text

    _, text = codex_run(codex_bin, home, project, env, "echo hello-from-codex")
    assert "hello-from-codex" in text
    (after,) = after_tool_events(real_redis, namespace)
    assert after.payload["tool_name"] == "Bash"
    assert after.payload["tool_input"]["command"] == "echo hello-from-codex"
    assert after.meta["harness"] == "codex"


def test_real_codex_blocks_a_guarded_call_with_redis_unreachable(
    codex_bin: Path, tmp_path: Path
) -> None:
    home, project = cli_dirs(tmp_path)
    install_cli("codex", home)
    _, text = codex_run(codex_bin, home, project, agent_env(UNREACHABLE, "nowhere"), TOUCH)
    assert f"hookbus is unavailable (cannot reach Redis at {UNREACHABLE}" in text
    assert not (project / "ran.txt").exists()


def test_real_codex_blocks_a_guarded_call_when_hookbus_cannot_even_start(
    codex_bin: Path, tmp_path: Path
) -> None:
    home, project = cli_dirs(tmp_path)
    install_cli(
        "codex", home, "--command", str(tmp_path / "no-such-hookbus"), "--events", "PreToolUse"
    )
    _, text = codex_run(codex_bin, home, project, agent_env(UNREACHABLE, "x"), TOUCH)
    assert "hookbus codex hook could not run" in text
    assert not (project / "ran.txt").exists()


def test_real_codex_skips_a_hook_whose_trust_record_does_not_match(
    codex_bin: Path, tmp_path: Path
) -> None:
    # the control: the same install with its trust records spoilt lets the call run, so
    # the blocks above are the trusted hooks at work
    home, project = cli_dirs(tmp_path)
    install_cli("codex", home)
    config = home / ".codex" / "config.toml"
    config.write_text(
        config.read_text().replace('trusted_hash = "sha256:', 'trusted_hash = "sha256:0')
    )
    codex_run(codex_bin, home, project, agent_env(UNREACHABLE, "nowhere"), TOUCH)
    assert (project / "ran.txt").read_text() == "ran\n"


def test_real_codex_runs_a_trusted_projects_hooks_installed_with_scope_project(
    codex_bin: Path, tmp_path: Path
) -> None:
    # Codex reads a project's trust records from the user's config only: the installer
    # writes them there (the project itself is trusted by its person, as here)
    home, project = cli_dirs(tmp_path)
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
    _, text = codex_run(codex_bin, home, project, agent_env(UNREACHABLE, "nowhere"), TOUCH)
    assert f"hookbus is unavailable (cannot reach Redis at {UNREACHABLE}" in text
    assert not (project / "ran.txt").exists()


def test_real_gemini_cli_runs_a_trusted_projects_hooks_installed_with_scope_project(
    gemini_bin: Path, tmp_path: Path
) -> None:
    home, project = cli_dirs(tmp_path)
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
    _, text = gemini_run(gemini_bin, home, project, agent_env(UNREACHABLE, "nowhere"), TOUCH)
    assert f"hookbus is unavailable (cannot reach Redis at {UNREACHABLE}" in text
    assert not (project / "ran.txt").exists()
