"""A judge's endpoint takes at most ``max_rate`` calls a second from one worker process: a
call with no token free before its deadline fails at once (the hook's on_error), counted as
``rate``; one whose token comes in time waits for it."""

from __future__ import annotations

import time
from pathlib import Path

from hookbus.bus.wire import Event
from hookbus.hooks.actions.llm import judge_stats
from hookbus.hooks.loader import load_hooks
from hookbus.hooks.registry import HookRegistry
from tests.judge_helpers import fake_judge, verdict, write_judge_hook


def run(hooks: HookRegistry, command: str, time_left_s: float) -> str:
    payload = {"tool_name": "Bash", "tool_input": {"command": command}}
    return hooks.run(Event(kind="PreToolUse", payload=payload), time_left_s=time_left_s).outcome


def test_calls_past_the_rate_fail_at_once_and_those_in_time_wait(tmp_path: Path) -> None:
    with fake_judge(lambda _: verdict("allow", "fine")) as judge:
        write_judge_hook(
            tmp_path, judge.endpoint, name="rated-judge", action_extra="max_rate = 1\n"
        )
        hooks = HookRegistry()
        hooks.replace_dynamic(load_hooks(tmp_path).hooks)
        first = run(hooks, "ls 1", 3.0)
        hasty = run(hooks, "ls 2", 0.5)  # the next token comes a second after the first
        started = time.monotonic()
        patient = run(hooks, "ls 3", 3.0)  # waits for it
        waited = time.monotonic() - started

    assert (first, hasty, patient) == ("allow", "deny", "allow")  # the guard's on_error
    assert judge_stats()["rated-judge"]["failures"] == {"rate": 1}
    assert 0.3 < waited < 2.0, waited
    assert len(judge.calls) == 2
