"""``hookbus doctor`` on a machine whose agent CLIs are stand-ins on PATH (a script that
answers ``--version`` as the real one does) and whose fleet is a real chain worker on the
real Redis: a healthy setup, a CLI with no install, an untrusted Codex hook, a guard
without ``onFailure``, and a fleet the hook cannot reach."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus.bus import keys
from tests.fanout_helpers import processes, spawn_worker, wait_for

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = {"claude": "2.1.331 (Claude Code)", "codex": "codex-cli 0.169.0"}


@pytest.fixture
def machine(tmp_path: Path) -> Path:
    """A home with stand-ins of ``claude`` and ``codex`` on its PATH, and a project."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "project").mkdir()
    for name, says in VERSIONS.items():
        stand_in = tmp_path / "bin" / name
        stand_in.write_text(f"#!/bin/sh\necho '{says}'\n")
        stand_in.chmod(0o755)
    return tmp_path


@pytest.fixture
def fleet(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> Iterator[None]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(HOOKBUS_REDIS_URL=real_redis_url, HOOKBUS_NAMESPACE=namespace)
    (tmp_path / "hooks").mkdir()
    with processes() as procs:
        procs.append(spawn_worker("chain", tmp_path / "hooks", env))
        wait_for(lambda: real_redis.hlen(keys.workers(namespace)) > 0, 30, "a heartbeat")
        yield


def _env(home: Path, url: str, ns: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOOKBUS_", "GITHUB_"))}
    return dict(
        env,
        HOME=str(home),
        CODEX_HOME=str(home / ".codex"),
        PATH=f"{home / 'bin'}:/usr/bin:/bin",
        PYTHONPATH=str(ROOT),
        HOOKBUS_REDIS_URL=url,
        HOOKBUS_NAMESPACE=ns,
    )


def _hookbus(home: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookbus", *args],
        env=env,
        cwd=home / "project",
        capture_output=True,
        text=True,
        timeout=120,
    )


def _doctor(home: Path, env: dict[str, str], *clis: str) -> tuple[int, dict[str, Any]]:
    done = _hookbus(home, env, "doctor", "--json", *clis)
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def _install(home: Path, env: dict[str, str], cli: str) -> None:
    done = _hookbus(home, env, cli, "install")
    assert done.returncode == 0, done.stderr


def _findings(report: dict[str, Any], cli: str) -> list[tuple[str, str]]:
    (found,) = [c for c in report["clis"] if c["name"] == cli]
    every = found["findings"] + [f for s in found["scopes"] for f in s["findings"]]
    return [(f["severity"], f["message"]) for f in every]


def test_a_healthy_setup_exits_zero_and_says_what_still_fails_open(
    machine: Path, real_redis_url: str, namespace: str, fleet: None
) -> None:
    env = _env(machine, real_redis_url, namespace)
    _install(machine, env, "claude-code")
    _install(machine, env, "codex")
    code, report = _doctor(machine, env)
    assert code == 0, report
    assert report["not_found"] == [
        "gemini-cli",
        "copilot",
        "qwen-code",
        "cline",
        "opencode",
        "kilo",
    ]
    for cli in report["clis"]:
        assert cli["version_tried"] is True, cli
        assert cli["fleet"]["chain_worker"] is True
        assert cli["fleet"]["namespace"] == namespace
        assert cli["fails_open_in_version"]
        user = next(s for s in cli["scopes"] if s["scope"] == "user")
        assert "PreToolUse" in user["events"] and "PermissionRequest" in user["events"]
        assert all(severity == "note" for severity, _ in _findings(report, cli["name"]))


def test_a_cli_with_no_install_fails_open(
    machine: Path, real_redis_url: str, namespace: str, fleet: None
) -> None:
    code, report = _doctor(machine, _env(machine, real_redis_url, namespace), "claude-code")
    assert code == 1
    assert (
        "fails_open",
        "hookbus is not installed in any scope: Claude Code runs unguarded "
        "(hookbus claude-code install)",
    ) in _findings(report, "claude-code")


def test_an_untrusted_codex_hook_fails_open(
    machine: Path, real_redis_url: str, namespace: str, fleet: None
) -> None:
    env = _env(machine, real_redis_url, namespace)
    _install(machine, env, "codex")
    config = machine / ".codex" / "config.toml"
    text = config.read_text()
    marker = 'trusted_hash = "sha256:'
    first = text.index(marker) + len(marker)
    config.write_text(text[:first] + "0" + text[first + 1 :])  # one record spoilt
    code, report = _doctor(machine, env, "codex")
    assert code == 1
    messages = [m for s, m in _findings(report, "codex") if s == "fails_open"]
    assert len(messages) == 1 and "skips these untrusted hooks silently" in messages[0]


def test_a_guard_without_on_failure_fails_open(
    machine: Path, real_redis_url: str, namespace: str, fleet: None
) -> None:
    env = _env(machine, real_redis_url, namespace)
    _install(machine, env, "claude-code")
    settings = machine / ".claude" / "settings.json"
    data = json.loads(settings.read_text())
    del data["hooks"]["PreToolUse"][0]["hooks"][0]["onFailure"]
    settings.write_text(json.dumps(data))
    code, report = _doctor(machine, env, "claude-code")
    assert code == 1
    assert [m for s, m in _findings(report, "claude-code") if s == "fails_open"] == [
        'PreToolUse: no "onFailure": "block": a hookbus that cannot start or answer lets the '
        "call run (re-run install)"
    ]


def test_an_unreachable_fleet_blocks_and_exits_69(machine: Path) -> None:
    env = _env(machine, "redis://127.0.0.1:1/0", "nowhere")
    _install(machine, env, "claude-code")
    code, report = _doctor(machine, env, "claude-code")
    assert code == 69
    (cli,) = report["clis"]
    assert cli["fleet"]["redis"] is False
    assert "cannot reach Redis at redis://127.0.0.1:1/0" in cli["fleet"]["detail"]
    assert [s for s, _ in _findings(report, "claude-code") if s != "note"] == ["blocks"]
    text = _hookbus(machine, env, "doctor", "claude-code")
    assert text.returncode == 69
    assert "every guarded call is denied" in " ".join(text.stdout.split())


def test_an_unknown_cli_is_a_usage_error(machine: Path) -> None:
    done = _hookbus(machine, _env(machine, "redis://127.0.0.1:1/0", "x"), "doctor", "cursor")
    assert done.returncode == 64
    assert "unknown CLI cursor" in done.stderr


def test_gemini_under_github_sha_is_checked_with_the_stripped_environment(
    machine: Path, real_redis_url: str, namespace: str, fleet: None
) -> None:
    stand_in = machine / "bin" / "gemini"
    stand_in.write_text("#!/bin/sh\necho 0.61.0\n")
    stand_in.chmod(0o755)
    # under GITHUB_SHA a Gemini CLI hook has PATH and HOME only: the user's hookbus.toml,
    # not the variables, decides which fleet it reaches
    env = dict(_env(machine, real_redis_url, namespace), GITHUB_SHA="0" * 40)
    _install(machine, env, "gemini-cli")
    config = machine / ".config" / "hookbus" / "hookbus.toml"
    config.parent.mkdir(parents=True)
    config.write_text('redis_url = "redis://127.0.0.1:1/0"\nnamespace = "elsewhere"\n')
    code, report = _doctor(machine, env, "gemini-cli")
    assert code == 69  # the variables naming the fleet never reach the hook
    assert report["clis"][0]["fleet"]["environment"].startswith("stripped to PATH and HOME")
    env = dict(_env(machine, "redis://127.0.0.1:1/0", "elsewhere"), GITHUB_SHA="0" * 40)
    config.write_text(f'redis_url = "{real_redis_url}"\nnamespace = "{namespace}"\n')
    code, report = _doctor(machine, env, "gemini-cli")
    assert code == 0, report
    fleet_seen = report["clis"][0]["fleet"]
    assert (fleet_seen["namespace"], fleet_seen["chain_worker"]) == (namespace, True)


def test_with_no_agent_cli_on_path_it_still_says_which_fleet_answers(
    tmp_path: Path, real_redis_url: str, namespace: str, fleet: None
) -> None:
    (tmp_path / "bin").mkdir(exist_ok=True)
    (tmp_path / "project").mkdir(exist_ok=True)
    env = _env(tmp_path, real_redis_url, namespace)
    done = _hookbus(tmp_path, env, "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    not_found = "claude-code, gemini-cli, codex, copilot, qwen-code, cline, opencode, kilo"
    assert f"not on PATH: {not_found}" in done.stdout
    assert f"namespace {namespace}: a chain worker answers" in done.stdout, done.stdout
    code, report = _doctor(tmp_path, env)
    assert code == 0 and report["fleet"]["chain_worker"] is True
    assert report["fleet"]["redis_url"] == real_redis_url


def test_with_no_agent_cli_on_path_and_no_fleet_it_exits_69_naming_the_fleet(
    tmp_path: Path,
) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "project").mkdir()
    env = _env(tmp_path, "redis://127.0.0.1:1/0", "nowhere")
    done = _hookbus(tmp_path, env, "doctor")
    assert done.returncode == 69, done.stdout + done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("fleet")]
    assert "redis://127.0.0.1:1/0 namespace nowhere: no answer" in line, line
