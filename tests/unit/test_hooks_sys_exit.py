"""A hook that calls sys.exit() fails that hook; it never stops the process running it."""

from __future__ import annotations

import sys

import pytest

from hookbus.bus.wire import Event, HookResult
from hookbus.errors import HookExecutionError
from hookbus.hooks.registry import HookRegistry


def exiting_hook(event: Event) -> None:
    sys.exit(3)


def context_hook(event: Event) -> HookResult:
    return HookResult(context=["after"])


@pytest.mark.parametrize("time_left_s", [None, 5.0], ids=["no-deadline", "deadline"])
def test_sys_exit_in_a_blocking_chain_is_that_hook_s_error(time_left_s: float | None) -> None:
    registry = HookRegistry()
    registry.register("quitter", exiting_hook, events=["PreToolUse"], priority=1, on_error="deny")
    registry.register("after", context_hook, events=["PreToolUse"], priority=2)
    decision = registry.run(Event(kind="PreToolUse"), time_left_s=time_left_s)
    assert decision.outcome == "deny"
    assert decision.trace[0].hook_id == "quitter"
    assert decision.trace[0].outcome == "error"


def test_sys_exit_in_an_observe_chain_does_not_stop_the_other_hooks() -> None:
    registry = HookRegistry()
    registry.register("quitter", exiting_hook, events=["SessionEnd"], priority=1)
    registry.register("after", context_hook, events=["SessionEnd"], priority=2)
    decision = registry.run(Event(kind="SessionEnd"))
    assert [run.hook_id for run in decision.trace] == ["quitter", "after"]
    assert decision.trace[0].outcome == "error"


def test_sys_exit_in_an_rq_job_hook_is_a_hook_execution_error() -> None:
    registry = HookRegistry()
    registry.register("quitter", exiting_hook, events=["PostToolUse"])
    with pytest.raises(HookExecutionError, match="quitter"):
        registry.run_hook("quitter", Event(kind="PostToolUse"))
