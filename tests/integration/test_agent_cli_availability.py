"""Where npm's registry cannot be reached, the tests that drive a real agent CLI are reported
as skipped with the reason; where ``HOOKBUS_REQUIRE_AGENT_CLIS`` is set (CI, whose machine
reaches the registry) they fail instead, so a broken download cannot pass as a skip.

A nested pytest runs one Claude Code binary test with npm pointed at a port nothing listens
on and an empty install cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration import agent_clis

ROOT = Path(__file__).resolve().parents[2]
#: One test of the real Claude Code binary that needs no Redis.
ONE_BINARY_TEST = (
    "tests/integration/test_claude_code_binary.py"
    "::test_real_claude_code_blocks_a_guarded_call_with_redis_unreachable"
)


def _offline_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HOOKBUS_", "npm_config_", "NPM_CONFIG_"))
    }
    return dict(
        env,
        HOOKBUS_TEST_CACHE=str(tmp_path / "cache"),
        npm_config_registry="http://127.0.0.1:1/",
        npm_config_fetch_retries="0",
        **extra,
    )


def _run_one(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-rsE",
            "--basetemp",
            str(tmp_path / "inner"),
            ONE_BINARY_TEST,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_cli_test_is_skipped_saying_why_when_the_registry_cannot_be_reached(
    tmp_path: Path,
) -> None:
    done = _run_one(tmp_path, _offline_env(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 skipped" in done.stdout
    assert "@anthropic-ai/claude-code@" in done.stdout
    assert "npm ping" in done.stdout
    assert "HOOKBUS_CLAUDE_BIN" in done.stdout
    assert not (tmp_path / "cache" / f"claude-{agent_clis.CLAUDE_CODE_VERSION}").exists()


def test_a_cli_test_fails_where_the_clis_are_required(tmp_path: Path) -> None:
    done = _run_one(tmp_path, _offline_env(tmp_path, HOOKBUS_REQUIRE_AGENT_CLIS="1"))
    assert done.returncode == 1, done.stdout[-3000:]
    assert "1 error" in done.stdout
    assert "HOOKBUS_REQUIRE_AGENT_CLIS is set" in done.stdout


def test_without_npm_the_reason_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm there
    monkeypatch.setenv("HOOKBUS_TEST_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HOOKBUS_GEMINI_BIN", raising=False)
    monkeypatch.delenv(agent_clis.REQUIRE_VARIABLE, raising=False)
    agent_clis.registry_problem.cache_clear()
    try:
        found, why = agent_clis.binary_or_skip_reason("gemini")
    finally:
        agent_clis.registry_problem.cache_clear()
    assert found is None
    assert "npm is not on PATH" in why
    assert "HOOKBUS_GEMINI_BIN" in why
