"""The two programs of docs/agent-sdks.md run as written, against the example hooks on
the fleet and with the fleet down: the model's ``mkfs`` is refused either way.

The Claude Agent SDK program runs the SDK's own bundled Claude Code (the docs give no
``cli_path``); both talk to the local fakes of their model APIs through the variables the
SDKs read (``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from tests.agent_cli_helpers import last_deny
from tests.agent_sdk_helpers import GUARDED, UNAVAILABLE, UNREACHABLE, project_with_disk, untouched
from tests.integration import fake_anthropic, fake_openai_chat

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "agent-sdks.md"


def _program(heading: str) -> str:
    """The first Python block under ``heading``."""
    text = DOC.read_text()
    text = text[text.index(f"\n## {heading}\n") :]
    match = re.search(r"^```python\n(.*?)^```", text, re.S | re.M)
    assert match is not None, f"no python block under {heading}"
    return match.group(1)


def _run(program: str, project: Path, env: dict[str, str]) -> str:
    (project / "agent.py").write_text(program)
    done = subprocess.run(
        [sys.executable, "agent.py"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _env(url: str, ns: str, home: Path) -> dict[str, str]:
    mine = ("HOOKBUS_", "CLAUDE", "ANTHROPIC_", "OPENAI_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(mine)}
    home.mkdir(exist_ok=True)
    return dict(
        env, HOME=str(home), PYTHONPATH=str(ROOT), HOOKBUS_REDIS_URL=url, HOOKBUS_NAMESPACE=ns
    )


@pytest.fixture(params=["fleet up", "fleet down"])
def fleet_url(
    request: pytest.FixtureRequest, real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> str:
    if request.param == "fleet down":
        return UNREACHABLE
    request.getfixturevalue("chain_worker")
    return real_redis_url


def _refused_reason(fleet_url: str, namespace: str) -> str:
    if fleet_url == UNREACHABLE:
        return UNAVAILABLE
    return last_deny(redis.Redis.from_url(fleet_url, protocol=2), namespace)


def test_the_claude_agent_sdk_program_is_refused_a_mkfs(
    fleet_url: str, namespace: str, tmp_path: Path
) -> None:
    project = project_with_disk(tmp_path)
    model = fake_anthropic.FakeModel([("Bash", {"command": GUARDED, "description": "format"})])
    with fake_anthropic.serve(model) as url:
        env = dict(
            _env(fleet_url, namespace, tmp_path / "home"),
            ANTHROPIC_BASE_URL=url,
            ANTHROPIC_API_KEY="sk-ant-fake-key-for-tests",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
        )
        out = _run(_program("Claude Agent SDK"), project, env)
    assert out.strip() == f"refused: [{GUARDED!r}]"
    (text,) = model.result_texts()
    assert _refused_reason(fleet_url, namespace) in text
    assert untouched(project)


def test_the_openai_agents_program_is_refused_a_mkfs(
    fleet_url: str, namespace: str, tmp_path: Path
) -> None:
    project = project_with_disk(tmp_path)
    model = fake_openai_chat.FakeChatModel([GUARDED], final_text="I may not format it.")
    with fake_openai_chat.serve(model) as url:
        env = dict(
            _env(fleet_url, namespace, tmp_path / "home"),
            OPENAI_BASE_URL=url,
            OPENAI_API_KEY="dummy",
            OPENAI_AGENTS_DISABLE_TRACING="1",
        )
        out = _run(_program("OpenAI Agents SDK"), project, env)
    assert out.strip() == "I may not format it."
    (text,) = model.result_texts()
    assert text.startswith(_refused_reason(fleet_url, namespace))
    assert untouched(project)
