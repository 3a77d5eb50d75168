"""The real Gemini CLI and Codex obey every answer form hookbus sends them.

After ``install``, a scripted chain worker (:mod:`tests.integration.test_claude_code_hook`:
a marker in the event selects the answer) answers the real binaries' events: a rewritten
tool input runs instead of the model's, a blocked prompt never reaches the model, added
context does, and a blocked stop makes the agent go on once with the fleet's reason (the
second stop arrives with ``stop_hook_active`` and passes without a request).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hookbus.bus import keys
from tests.agent_cli_helpers import agent_env, install_cli
from tests.blocking_helpers import wait_for
from tests.claude_code_helpers import start_worker, stop_worker
from tests.integration import agent_clis
from tests.integration.fake_codex_model import FakeCodexModel
from tests.integration.fake_codex_model import serve as serve_codex
from tests.integration.fake_gemini import FakeGemini
from tests.integration.fake_gemini import serve as serve_gemini

pytestmark = pytest.mark.slow


@pytest.fixture
def scripted_fleet(real_redis_url: str, real_redis: redis.Redis, namespace: str) -> Iterator[None]:
    proc = start_worker(real_redis_url, namespace)
    try:
        wait_for(lambda: real_redis.hlen(keys.workers(namespace)) > 0, what="a heartbeat")
        yield
    finally:
        stop_worker(proc)


@pytest.fixture
def gemini_home(tmp_path: Path) -> tuple[Path, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir(parents=True)
    agent_clis.gemini_settings(home)
    install_cli("gemini-cli", home)
    return home, project


@pytest.fixture
def codex_dirs(tmp_path: Path) -> tuple[Path, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    install_cli("codex", home)
    return home, project


def _gemini(
    gemini: Path, dirs: tuple[Path, Path], env: dict[str, str], model: FakeGemini, prompt: str
) -> dict[str, object]:
    home, project = dirs
    with serve_gemini(model) as url:
        done = agent_clis.run_gemini(
            gemini, base_url=url, home=home, project=project, env=env, prompt=prompt
        )
    assert done.returncode in (0, 1), done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout) if done.stdout.strip() else {}
    return result


def _codex(
    codex: Path, dirs: tuple[Path, Path], env: dict[str, str], model: FakeCodexModel, prompt: str
) -> str:
    home, project = dirs
    with serve_codex(model) as url:
        done = agent_clis.run_codex(
            codex, base_url=url, home=home, project=project, env=env, prompt=prompt
        )
    return done.stdout + done.stderr


def test_gemini_runs_the_input_the_fleet_rewrote(
    gemini_bin: Path,
    gemini_home: tuple[Path, Path],
    real_redis_url: str,
    namespace: str,
    scripted_fleet: None,
) -> None:
    model = FakeGemini([("run_shell_command", {"command": "echo HOOKBUS_REWRITE > ran.txt"})])
    _gemini(gemini_bin, gemini_home, agent_env(real_redis_url, namespace), model, "run it")
    (text,) = model.result_texts()
    assert "total " in text  # the fleet's `ls -la` ran instead
    assert not (gemini_home[1] / "ran.txt").exists()


def test_gemini_drops_a_prompt_the_fleet_blocks_and_passes_added_context(
    gemini_bin: Path,
    gemini_home: tuple[Path, Path],
    real_redis_url: str,
    namespace: str,
    scripted_fleet: None,
) -> None:
    env = agent_env(real_redis_url, namespace)
    model = FakeGemini([])
    _gemini(gemini_bin, gemini_home, env, model, "HOOKBUS_DENY please")
    assert model.requests == []  # the prompt never reached the model
    model = FakeGemini([])
    _gemini(gemini_bin, gemini_home, env, model, "HOOKBUS_CONTEXT please")
    assert "context from the fleet for PromptSubmit of" in json.dumps(model.requests[0])


def test_gemini_goes_on_after_a_blocked_after_agent_and_the_loop_ends(
    gemini_bin: Path,
    gemini_home: tuple[Path, Path],
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    scripted_fleet: None,
) -> None:
    model = FakeGemini([], final_text="HOOKBUS_FOR_Stop HOOKBUS_DENY")
    _gemini(gemini_bin, gemini_home, agent_env(real_redis_url, namespace), model, "say hi")
    assert len(model.requests) == 2
    assert "denied by the fleet: Stop of" in json.dumps(model.requests[1]["contents"][-1])
    stops = [f for _, f in real_redis.xrange(keys.decisions(namespace)) if f[b"kind"] == b"Stop"]
    assert len(stops) == 1


def test_codex_blocks_a_prompt_passes_context_and_goes_on_after_a_blocked_stop(
    codex_bin: Path,
    codex_dirs: tuple[Path, Path],
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    scripted_fleet: None,
) -> None:
    env = agent_env(real_redis_url, namespace)
    model = FakeCodexModel([])
    _codex(codex_bin, codex_dirs, env, model, "HOOKBUS_DENY please")
    assert model.requests == []  # the prompt never reached the model
    model = FakeCodexModel([])
    _codex(codex_bin, codex_dirs, env, model, "HOOKBUS_CONTEXT please")
    assert "context from the fleet for PromptSubmit of" in json.dumps(model.requests[0]["input"])

    def stops() -> int:
        entries = real_redis.xrange(keys.decisions(namespace))
        return sum(1 for _, f in entries if f[b"kind"] == b"Stop")

    before = stops()
    model = FakeCodexModel([], final_text="HOOKBUS_FOR_Stop HOOKBUS_DENY")
    _codex(codex_bin, codex_dirs, env, model, "say hi")
    assert len(model.requests) == 2
    assert "denied by the fleet: Stop of" in json.dumps(model.requests[1]["input"])
    assert stops() == before + 1  # the second Stop came with stop_hook_active: no request
