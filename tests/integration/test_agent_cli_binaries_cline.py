"""The real Cline CLI binary, offline, on the fleet.

Cline (npm ``cline``, pinned in :mod:`tests.integration.agent_clis`) runs one headless task
(``cline --json``) against a local fake Chat Completions endpoint
(:mod:`tests.integration.fake_openai_chat`) whose model asks for ``mkfs.ext4 -q -F disk.img``
and then ``ls`` in the same task, after ``hookbus cline install`` wrote its hook files into
a fresh ``$HOME``. A chain worker serves the example hooks, unchanged: block-destructive,
written against the canonical ``Bash``, sees Cline's ``run_commands`` as that.

* unhooked, the command formats its image (so the checks below can fail);
* installed, the bus refuses it (the deny in the decision log), the image is untouched, the
  fleet's reason is what the model reads back, ``ls`` still runs in the same task, and the
  PostToolUse of ``ls`` reaches the event stream;
* a file read of a secret (``read_files``, refused by the example secret-file-guard) is
  refused too, its content never reaching the model, and the task goes on;
* with Redis unreachable, the command is still refused;
* a hookbus that cannot answer at all (it prints half a JSON and fails) still refuses: the
  hook file's own fallback stops the task;
* ``uninstall`` leaves the user's hooks folder as it was;
* installed with ``--mode http``, the same refusal comes through the gateway (the task goes
  on), and with the gateway down the hook file's fallback stops the task.

Where npm or the registry cannot be reached these tests are skipped, saying why (the fixture
tests of ``tests/unit/test_harness_cline.py`` run everywhere).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus.bus import keys
from hookbus.bus.decision_batch import logged
from tests.agent_cli_helpers import (
    HOOKBUS,
    ROOT,
    UNREACHABLE,
    after_tool_events,
    agent_env,
    cli_dirs,
    last_deny,
)
from tests.blocking_helpers import wait_for
from tests.claude_code_helpers import free_gateway_port
from tests.integration import agent_clis
from tests.integration.fake_openai_chat import FakeChatModel, serve

GUARDED = "mkfs.ext4 -q -F disk.img"
#: The bytes of an ext2/3/4 superblock's magic number, at its offset in the image.
EXT4_MAGIC_AT, EXT4_MAGIC = 1024 + 56, b"\x53\xef"
IMAGE_BYTES = 4 * 1024 * 1024

pytestmark = [pytest.mark.slow, pytest.mark.agent_cli]


def _image(project: Path) -> Path:
    image = project / "disk.img"
    image.write_bytes(bytes(IMAGE_BYTES))
    return image


def _formatted(image: Path) -> bool:
    with image.open("rb") as fh:
        fh.seek(EXT4_MAGIC_AT)
        return fh.read(2) == EXT4_MAGIC


def _hookbus(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HOOKBUS, "cline", *args],
        env=dict(
            {k: v for k, v in os.environ.items() if k != "CLINE_DIR"},
            HOME=str(home),
            PYTHONPATH=str(ROOT),
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _task(
    cline: Path,
    home: Path,
    project: Path,
    env: dict[str, str],
    commands: list[str | tuple[str, dict[str, Any]]],
) -> tuple[FakeChatModel, dict[str, Any]]:
    """One task asking for ``commands`` (or tool calls) in turn; the model and the run's
    ``run_result``."""
    model = FakeChatModel(commands, one_task=True)
    with serve(model) as url:
        done = agent_clis.run_cline(cline, base_url=url, home=home, project=project, env=env)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    return model, agent_clis.run_result(done)


def _user_hooks(home: Path) -> dict[str, str]:
    folder = home / ".cline" / "hooks"
    return {p.name: p.read_text() for p in folder.iterdir()} if folder.is_dir() else {}


def _contexts(model: FakeChatModel) -> str:
    """Every user message the model was sent after the first (hook contexts among them)."""
    texts = []
    for body in model.requests:
        for message in body.get("messages") or []:
            if message.get("role") == "user" and "<hook_context" in str(message.get("content")):
                texts.append(str(message.get("content")))
    return "\n".join(texts)


def test_the_bus_refuses_the_guarded_command_ls_runs_and_uninstall_restores_the_folder(
    cline_bin: Path,
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    chain_worker: None,
    tmp_path: Path,
) -> None:
    home, project = cli_dirs(tmp_path)
    env = agent_env(real_redis_url, namespace)
    control = _image(project)
    _, result = _task(cline_bin, home, project, env, [GUARDED])
    assert result.get("finishReason") == "completed"
    assert _formatted(control), "unhooked, mkfs.ext4 should have formatted the image"

    users = home / ".cline" / "hooks"
    users.mkdir(parents=True)
    (users / "TaskStart.sh").write_text("#!/bin/sh\ncat >/dev/null\n")
    before = _user_hooks(home)
    done = _hookbus(home, "install")
    assert done.returncode == 0, done.stderr
    image = _image(project)

    model, result = _task(cline_bin, home, project, env, [GUARDED, "ls"])
    assert result.get("finishReason") == "completed", result
    assert not _formatted(image)
    wait_for(
        lambda: any(b"d" in r for r in logged(real_redis, keys.decisions(namespace))), what="a log"
    )
    reason = last_deny(real_redis, namespace)
    assert reason.startswith("refused: destructive command (mkfs.ext4 formats a disk)")
    refused, listed = model.result_texts()
    assert reason in refused
    assert reason in _contexts(model)
    assert "disk.img" in listed  # ls ran, in the same task

    wait_for(
        lambda: any(
            e.payload.get("tool_input", {}).get("command") == "ls"
            for e in after_tool_events(real_redis, namespace)
        ),
        what="the PostToolUse of ls",
    )
    posts = after_tool_events(real_redis, namespace)
    assert {e.meta["harness"] for e in posts} == {"cline"}
    assert {e.payload["tool_name"] for e in posts} == {"Bash"}

    done = _hookbus(home, "uninstall")
    assert done.returncode == 0, done.stderr
    assert _user_hooks(home) == before


def test_a_refused_file_read_returns_no_content_and_the_task_goes_on(
    cline_bin: Path,
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    chain_worker: None,
    tmp_path: Path,
) -> None:
    home, project = cli_dirs(tmp_path)
    assert _hookbus(home, "install").returncode == 0
    secret = ("read_files", {"files": [{"path": str(project / "deploy" / "prod.env")}]})
    model, result = _task(
        cline_bin, home, project, agent_env(real_redis_url, namespace), [secret, "ls"]
    )
    assert result.get("finishReason") == "completed", result
    reason = last_deny(real_redis, namespace)
    assert reason.startswith("refused: the call touches a secret file")
    refused, listed = model.result_texts()
    assert "hunter2" not in refused and "hunter2" not in _contexts(model)
    assert reason in _contexts(model)
    assert "deploy" in listed


def test_with_redis_unreachable_the_guarded_command_is_still_refused(
    cline_bin: Path, tmp_path: Path
) -> None:
    home, project = cli_dirs(tmp_path)
    assert _hookbus(home, "install").returncode == 0
    image = _image(project)
    model, _ = _task(cline_bin, home, project, agent_env(UNREACHABLE, "nowhere"), [GUARDED])
    assert not _formatted(image)
    (text,) = model.result_texts()
    assert f"hookbus is unavailable (cannot reach Redis at {UNREACHABLE}" in text


def test_a_hookbus_that_fails_half_way_through_its_answer_still_stops_the_call(
    cline_bin: Path, tmp_path: Path
) -> None:
    home, project = cli_dirs(tmp_path)
    broken = tmp_path / "broken-hookbus"
    broken.write_text("#!/bin/sh\ncat >/dev/null\nprintf '{\"overrideInput\": '\nexit 1\n")
    broken.chmod(0o755)
    assert _hookbus(home, "install", "--command", str(broken)).returncode == 0
    image = _image(project)
    model, result = _task(cline_bin, home, project, agent_env(UNREACHABLE, "x"), [GUARDED])
    assert not _formatted(image)
    assert result.get("finishReason") == "aborted", result
    assert model.result_texts() == []


def test_through_the_gateway_the_bus_refuses_the_command_and_the_task_goes_on(
    cline_bin: Path,
    real_redis: redis.Redis,
    namespace: str,
    chain_worker: None,
    gateway: str,
    tmp_path: Path,
) -> None:
    home, project = cli_dirs(tmp_path)
    assert _hookbus(home, "install", "--mode", "http", "--url", gateway).returncode == 0
    image = _image(project)
    env = agent_env(UNREACHABLE, "not-used")  # only the gateway talks to Redis
    model, result = _task(cline_bin, home, project, env, [GUARDED, "ls"])
    assert result.get("finishReason") == "completed", result
    assert not _formatted(image)
    reason = last_deny(real_redis, namespace)
    refused, listed = model.result_texts()
    assert reason.startswith("refused: destructive command") and reason in refused
    assert "disk.img" in listed


def test_with_the_gateway_down_the_hook_file_stops_the_task(
    cline_bin: Path, tmp_path: Path
) -> None:
    home, project = cli_dirs(tmp_path)
    down = f"http://127.0.0.1:{free_gateway_port()}"
    assert _hookbus(home, "install", "--mode", "http", "--url", down).returncode == 0
    image = _image(project)
    model, result = _task(cline_bin, home, project, agent_env(UNREACHABLE, "x"), [GUARDED])
    assert result.get("finishReason") == "aborted", result
    assert not _formatted(image)
    assert model.result_texts() == []
