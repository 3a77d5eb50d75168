"""The fleet as the agent SDK integrations ask it: never raising, always in time.

The real SDKs and the real fleet are in tests/integration (test_claude_agent_sdk.py,
test_openai_agents_sdk.py); here, what no fleet produces on demand: a gateway that hangs or
breaks, settings that do not load, an SDK that is not installed.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hookbus.bus.settings.loader import load_settings
from hookbus.harnesses.adapters import Output, adapter
from hookbus.harnesses.gateway import Gateway
from hookbus.integrations.fleet import Fleet

PRE_TOOL_USE = {
    "hook_event_name": "PreToolUse",
    "session_id": "s1",
    "tool_name": "Bash",
    "tool_input": {"command": "ls"},
}


def _reason(stdout: Any) -> str:
    return str(stdout["hookSpecificOutput"]["permissionDecisionReason"])


def _settings() -> Any:
    return load_settings(overrides={"redis_url": "redis://127.0.0.1:1/0"}, warn=False).settings


def test_a_gateway_that_never_answers_is_denied_at_the_fleets_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def hang(self: Gateway, *args: Any) -> Any:
        await asyncio.sleep(3600)

    monkeypatch.setattr(Gateway, "answer", hang)
    fleet = Fleet(_settings(), timeout_s=0.8)
    started = time.monotonic()
    out = asyncio.run(fleet.answer(adapter("claude-code"), dict(PRE_TOOL_USE)))
    assert 0.8 <= time.monotonic() - started < 2
    assert _reason(out.stdout).startswith("hookbus is unavailable (no answer within 0.8 s)")


def test_a_gateway_that_breaks_is_a_deny_never_an_exception(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def broken(self: Gateway, *args: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Gateway, "answer", broken)
    out = asyncio.run(Fleet(_settings()).answer(adapter("claude-code"), dict(PRE_TOOL_USE)))
    assert _reason(out.stdout).startswith("hookbus is unavailable (the bus failed: a bug)")


def test_a_non_guard_event_the_fleet_cannot_answer_passes_saying_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def broken(self: Gateway, *args: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Gateway, "answer", broken)
    stop = {"hook_event_name": "Stop", "session_id": "s1"}
    out = asyncio.run(Fleet(_settings()).answer(adapter("claude-code"), stop))
    assert out.stdout == {"systemMessage": "hookbus: the bus failed: a bug; Stop passes"}


def test_settings_that_do_not_load_deny_the_guard(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOOKBUS_CONFIG", str(tmp_path / "missing.toml"))
    out = asyncio.run(Fleet().answer(adapter("claude-code"), dict(PRE_TOOL_USE)))
    reason = _reason(out.stdout)
    assert reason.startswith("hookbus is unavailable (the bus failed: ")
    assert "missing.toml" in reason


def test_an_input_with_no_event_name_is_a_deny() -> None:
    out = asyncio.run(Fleet(_settings()).answer(adapter("claude-code"), {"tool_name": "Bash"}))
    assert _reason(out.stdout).startswith("hookbus is unavailable (the hook input names no event)")


def test_hooks_that_start_together_share_one_client_and_a_new_loop_gets_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[Gateway] = []
    real_init = Gateway.__init__

    def counted(self: Gateway, *args: Any) -> None:
        made.append(self)
        real_init(self, *args)

    async def allow(self: Gateway, *args: Any) -> Output:
        await asyncio.sleep(0.01)
        return Output()

    monkeypatch.setattr(Gateway, "__init__", counted)
    monkeypatch.setattr(Gateway, "answer", allow)
    monkeypatch.setenv("HOOKBUS_REDIS_URL", "redis://127.0.0.1:1/0")
    fleet = Fleet()  # settings loaded by the first hook, in a thread
    harness = adapter("claude-code")

    async def together() -> None:
        await asyncio.gather(*(fleet.answer(harness, dict(PRE_TOOL_USE)) for _ in range(5)))

    asyncio.run(together())
    assert len(made) == 1
    asyncio.run(together())
    assert len(made) == 2


def test_a_timeout_within_the_sdk_margin_is_refused() -> None:
    with pytest.raises(ValueError, match=r"timeout_s must be over 0\.5 s"):
        Fleet(timeout_s=0.5)


@pytest.mark.parametrize(
    ("module", "package"),
    [
        ("hookbus.integrations.claude_agent_sdk", "claude_agent_sdk"),
        ("hookbus.integrations.openai_agents", "agents"),
    ],
)
def test_an_integration_without_its_sdk_names_the_extra_to_install(
    module: str, package: str
) -> None:
    code = (
        f"import sys; sys.modules[{package!r}] = None\n"
        "from hookbus.errors import MissingExtra\n"
        "try:\n"
        f"    import {module}\n"
        "except MissingExtra as exc:\n"
        "    print(exc, isinstance(exc, ImportError))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    extra = module.rsplit(".", 1)[1].replace("_", "-")
    assert done.stdout.strip().endswith(f"pip install 'hookbus[{extra}]' True"), done.stderr
