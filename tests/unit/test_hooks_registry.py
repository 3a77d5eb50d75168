"""HookRegistry: seed 002's acceptance scenarios (stories 1-4 and 6) and edge cases, plus
the chain rules of DESIGN §3 (updated, context, signals, on_error, deadlines, snapshots)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from hookbus.bus.wire import Event, HookResult, HookSignal
from hookbus.errors import (
    HookExecutionError,
    HookNotFound,
    HookRegistrationError,
    HookTimeout,
    ManifestError,
    UnknownEventKind,
)
from hookbus.hooks.manifest import HookManifest, parse_toml
from hookbus.hooks.registry import HookRegistry


def pre(**payload: Any) -> Event:
    return Event(kind="PreToolUse", payload={"tool_name": "Bash", **payload})


def post(**payload: Any) -> Event:
    return Event(kind="PostToolUse", payload={"tool_name": "Bash", **payload})


def recorder(calls: list[str], name: str, answer: Any = None) -> Any:
    def hook(event: Event) -> Any:
        calls.append(name)
        return answer

    return hook


# --- story 1: pre-hooks in priority order ---------------------------------------------------


def test_pre_hooks_run_in_ascending_priority_and_the_result_reflects_the_last_hook() -> None:
    registry = HookRegistry()
    calls: list[str] = []
    registry.register(
        "p30", recorder(calls, "p30", {"context": "from 30"}), events="PreToolUse", priority=30
    )
    registry.register("p10", recorder(calls, "p10"), events="PreToolUse", priority=10)
    registry.register("p20", recorder(calls, "p20"), events="PreToolUse", priority=20)

    decision = registry.run(pre())

    assert calls == ["p10", "p20", "p30"]
    assert decision.outcome == "allow"
    assert decision.context == ["from 30"]
    assert [r.hook_id for r in decision.trace] == ["p10", "p20", "p30"]


@pytest.mark.parametrize("stop", ["deny", "halt", "ask"])
def test_a_stopping_pre_hook_skips_every_later_hook(stop: str) -> None:
    registry = HookRegistry()
    calls: list[str] = []
    registry.register("p10", recorder(calls, "p10"), events="PreToolUse", priority=10)
    registry.register(
        "p20",
        recorder(calls, "p20", {"outcome": stop, "reason": "no"}),
        events="PreToolUse",
        priority=20,
    )
    registry.register("p30", recorder(calls, "p30"), events="PreToolUse", priority=30)

    decision = registry.run(pre())

    assert calls == ["p10", "p20"]
    assert decision.outcome == stop
    assert decision.reason == "no"
    assert [(r.hook_id, r.outcome) for r in decision.trace] == [
        ("p10", "continue"),
        ("p20", stop),
        ("p30", "skipped"),
    ]


def test_no_pre_hooks_means_allow_without_error() -> None:
    decision = HookRegistry().run(pre())
    assert decision.outcome == "allow"
    assert decision.trace == []
    assert not decision.degraded


# --- story 2: post-hooks with error isolation -------------------------------------------------


def test_every_post_hook_runs_whatever_the_others_answer() -> None:
    registry = HookRegistry()
    calls: list[str] = []
    registry.register("a", recorder(calls, "a", {"outcome": "deny"}), events="PostToolUse")
    registry.register("b", recorder(calls, "b", {"outcome": "halt"}), events="PostToolUse")
    registry.register("c", recorder(calls, "c"), events="PostToolUse")

    decision = registry.run(post())

    assert calls == ["a", "b", "c"]
    assert decision.outcome == "allow"


def test_a_raising_post_hook_is_recorded_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = HookRegistry()
    calls: list[str] = []

    def broken(event: Event) -> None:
        calls.append("b")
        raise RuntimeError("boom")

    registry.register("a", recorder(calls, "a"), events="PostToolUse")
    registry.register("b", broken, events="PostToolUse")
    registry.register("c", recorder(calls, "c"), events="PostToolUse")

    decision = registry.run(post())

    assert calls == ["a", "b", "c"]
    assert decision.outcome == "allow"
    failed = decision.trace[1]
    assert (failed.hook_id, failed.outcome) == ("b", "error")
    assert failed.error == "RuntimeError: boom"
    assert "boom" in caplog.text


def test_no_post_hooks_completes_silently() -> None:
    decision = HookRegistry().run(post())
    assert decision.outcome == "allow"
    assert decision.trace == []


def test_decisions_context_and_signals_of_post_hooks_are_dropped_as_a_misconfiguration(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = HookRegistry()
    registry.register(
        "chatty",
        lambda e: {"outcome": "deny", "context": "x", "signals": [{"kind": "routing_hint"}]},
        events="PostToolUse",
    )

    decision = registry.run(post())

    assert decision.outcome == "allow"
    assert decision.context == [] and decision.signals == []
    assert "dropped" in decision.trace[0].notes[0]
    assert "misconfigured hook chatty" in caplog.text


# --- story 3: deregistration -------------------------------------------


def test_a_deregistered_hook_no_longer_runs() -> None:
    registry = HookRegistry()
    calls: list[str] = []
    registry.register("scope-check", recorder(calls, "scope"), events="PreToolUse")
    registry.run(pre())
    assert registry.deregister("scope-check") is True

    registry.run(pre())

    assert calls == ["scope"]
    assert registry.hooks("PreToolUse") == []


def test_deregistering_an_unknown_id_is_a_silent_no_op() -> None:
    registry = HookRegistry()
    registry.register("a", lambda e: None, events="PostToolUse")
    assert registry.deregister("nonexistent-id") is False
    assert [h.id for h in registry.hooks("PostToolUse")] == ["a"]


def test_registering_again_after_deregistering_runs_the_new_hook() -> None:
    registry = HookRegistry()
    calls: list[str] = []
    registry.register("scope-check", recorder(calls, "old"), events="PreToolUse")
    registry.deregister("scope-check")
    registry.register("scope-check", recorder(calls, "new"), events="PreToolUse")

    registry.run(pre())

    assert calls == ["new"]


# --- story 4: inspection -------------------------------------------


def test_hooks_of_a_kind_are_listed_in_execution_order_with_id_and_priority() -> None:
    registry = HookRegistry()
    registry.register("late", lambda e: None, events="PreToolUse", priority=50)
    registry.register("early", lambda e: None, events="PreToolUse", priority=5)
    registry.register("post", lambda e: None, events="PostToolUse")

    pre_hooks = registry.hooks("PreToolUse")
    post_hooks = registry.hooks("PostToolUse")

    assert [(h.id, h.priority) for h in pre_hooks] == [("early", 5), ("late", 50)]
    assert [h.id for h in post_hooks] == ["post"]
    assert {h.source for h in pre_hooks} == {"static"}
    assert pre_hooks[0].events == ("PreToolUse",)


def test_an_empty_registry_lists_no_hooks() -> None:
    assert HookRegistry().hooks("PreToolUse") == []
    assert HookRegistry().hooks() == []


def test_hooks_accepts_an_alias_of_the_kind() -> None:
    registry = HookRegistry()
    registry.register("a", lambda e: None, events="before_tool_call")
    assert [h.id for h in registry.hooks("PreAbilityCall")] == ["a"]


# --- story 6: mock hooks -------------------------------------------


def test_only_the_mock_runs_in_a_fresh_registry() -> None:
    registry = HookRegistry()
    registry.register(
        "mock", lambda e: HookResult(outcome="deny", reason="mocked"), events="PreToolUse"
    )
    decision = registry.run(pre())
    assert decision.outcome == "deny"
    assert decision.reason == "mocked"
    assert [r.hook_id for r in decision.trace] == ["mock"]


def test_a_mock_with_an_existing_id_replaces_the_real_hook() -> None:
    registry = HookRegistry()
    calls: list[str] = []
    registry.register("budget", recorder(calls, "real"), events="PreToolUse", priority=10)
    registry.register("after", recorder(calls, "after"), events="PreToolUse", priority=10)
    registry.register("budget", recorder(calls, "mock"), events="PreToolUse", priority=10)

    registry.run(pre())

    assert calls == ["mock", "after"]
    assert len(registry.hooks("PreToolUse")) == 2


# --- edge cases -------------------------------------------


def test_equal_priorities_run_in_registration_order() -> None:
    registry = HookRegistry()
    calls: list[str] = []
    for name in ["c", "a", "b"]:
        registry.register(name, recorder(calls, name), events="PreToolUse", priority=7)
    registry.run(pre())
    assert calls == ["c", "a", "b"]


def test_default_priority_is_100() -> None:
    registry = HookRegistry()
    registry.register("a", lambda e: None, events="PreToolUse")
    assert registry.hooks()[0].priority == 100


def test_an_unexpected_outcome_word_short_circuits_the_chain() -> None:
    registry = HookRegistry()
    calls: list[str] = []
    registry.register(
        "weird", recorder(calls, "weird", {"outcome": "EXPLODE"}), events="PreToolUse", priority=1
    )
    registry.register("later", recorder(calls, "later"), events="PreToolUse", priority=2)
    decision = registry.run(pre())
    assert calls == ["weird"]
    assert decision.outcome == "deny"
    assert [r.outcome for r in decision.trace] == ["deny", "skipped"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"events": "NoSuchEvent"}, "unknown event kind 'NoSuchEvent'"),
        ({"events": "PreToolUse", "priority": "high"}, "priority must be an integer"),
        ({"events": "PreToolUse", "priority": True}, "priority must be an integer"),
        ({"events": "PreToolUse", "on_error": "maybe"}, "on_error must be allow or deny"),
        ({"events": "PreToolUse", "timeout_s": 0}, "timeout_s must be > 0"),
        ({"events": []}, "at least one event kind"),
    ],
)
def test_bad_registrations_are_rejected_naming_the_hook(
    kwargs: dict[str, Any], message: str
) -> None:
    registry = HookRegistry()
    with pytest.raises(HookRegistrationError) as info:
        registry.register("my-hook", lambda e: None, **kwargs)
    assert "'my-hook'" in str(info.value)
    assert message in str(info.value)
    assert registry.hooks() == []


def test_a_function_with_the_wrong_signature_is_rejected_at_registration() -> None:
    def two(event: Event, extra: int) -> None:
        return None

    with pytest.raises(HookRegistrationError, match="must accept exactly one argument"):
        HookRegistry().register("two-args", two, events="PreToolUse")
    with pytest.raises(HookRegistrationError, match="no-args"):
        HookRegistry().register("no-args", lambda: None, events="PreToolUse")


def test_the_decorator_registers_with_the_given_priority_and_returns_the_function() -> None:
    registry = HookRegistry()

    @registry.hook("PreToolUse", priority=10)
    def guard(event: Event) -> dict[str, str]:
        return {"outcome": "deny", "reason": "guarded"}

    assert callable(guard)
    [descriptor] = registry.hooks("PreToolUse")
    assert descriptor.priority == 10
    assert descriptor.id.endswith("guard")
    assert registry.run(pre()).outcome == "deny"


def test_run_accepts_an_alias_kind_and_rejects_an_unknown_one() -> None:
    registry = HookRegistry()
    registry.register("g", lambda e: {"outcome": "deny"}, events="PreToolUse")
    assert registry.run(Event(kind="BeforeToolCall")).outcome == "deny"
    with pytest.raises(UnknownEventKind):
        registry.run(Event(kind="NotAKind"))


def test_async_hooks_run_and_answer_like_sync_ones() -> None:
    registry = HookRegistry()

    async def hook(event: Event) -> dict[str, Any]:
        return {"outcome": "deny", "reason": "async says no"}

    registry.register("async", hook, events="PreToolUse")
    decision = registry.run(pre())
    assert (decision.outcome, decision.reason) == ("deny", "async says no")


# --- the chain: updated, context, signals, catalogue -------------------------------------------


def test_updated_input_applies_before_the_next_hook_and_is_returned() -> None:
    registry = HookRegistry()
    seen: list[Any] = []
    registry.register(
        "rewrite",
        lambda e: {"updated": {"tool_input": {"command": "ls -la"}}},
        events="PreToolUse",
        priority=1,
    )
    registry.register(
        "observer", lambda e: seen.append(e.payload["tool_input"]), events="PreToolUse", priority=2
    )

    decision = registry.run(pre(tool_input={"command": "ls", "timeout": 5}))

    assert seen == [{"command": "ls -la", "timeout": 5}]
    assert decision.updated == {"tool_input": {"command": "ls -la", "timeout": 5}}


def test_context_and_signals_accumulate_across_hooks() -> None:
    registry = HookRegistry()
    registry.register(
        "a",
        lambda e: {"context": "one", "signals": [{"kind": "routing_hint", "code": "A"}]},
        events="PromptSubmit",
        priority=1,
    )
    registry.register(
        "b",
        lambda e: HookResult(context=["two"], signals=[HookSignal(kind="normalized_intent")]),
        events="PromptSubmit",
        priority=2,
    )

    decision = registry.run(Event(kind="PromptSubmit", payload={"prompt": "hi"}))

    assert decision.context == ["one", "two"]
    assert [s.kind for s in decision.signals] == ["routing_hint", "normalized_intent"]


def test_changes_the_catalogue_does_not_allow_are_dropped_and_noted() -> None:
    registry = HookRegistry()
    registry.register("sneaky", lambda e: {"updated": {"tool_name": "Write"}}, events="PreToolUse")
    decision = registry.run(pre())
    assert decision.updated == {}
    assert "tool_name" in decision.trace[0].notes[0]


def test_a_verdict_the_kind_does_not_allow_becomes_deny() -> None:
    registry = HookRegistry()
    registry.register("asker", lambda e: {"outcome": "ask"}, events="PromptSubmit")
    decision = registry.run(Event(kind="PromptSubmit"))
    assert decision.outcome == "deny"
    assert "treated as deny" in decision.trace[0].notes[0]


def test_a_may_block_kind_sent_as_a_request_runs_as_a_chain() -> None:
    registry = HookRegistry()
    calls: list[str] = []
    registry.register(
        "a",
        recorder(calls, "a", {"outcome": "deny", "reason": "r"}),
        events="PostToolUse",
        priority=1,
    )
    registry.register("b", recorder(calls, "b"), events="PostToolUse", priority=2)

    decision = registry.run(Event(kind="PostToolUse", reply_to="inbox", deadline=1))

    assert decision.outcome == "deny"
    assert calls == ["a"]


# --- errors, on_error and deadlines -------------------------------------------


def test_on_error_deny_turns_a_failing_hook_into_a_deny_and_stops_the_chain() -> None:
    registry = HookRegistry()
    calls: list[str] = []

    def broken(event: Event) -> None:
        raise ValueError("bad state")

    registry.register("guard", broken, events="PreToolUse", on_error="deny", priority=1)
    registry.register("later", recorder(calls, "later"), events="PreToolUse", priority=2)

    decision = registry.run(pre())

    assert decision.outcome == "deny"
    assert "guard" in (decision.reason or "") and "bad state" in (decision.reason or "")
    assert calls == []
    assert [r.outcome for r in decision.trace] == ["error", "skipped"]


def test_on_error_allow_lets_the_chain_go_on() -> None:
    registry = HookRegistry()
    registry.register("broken", lambda e: 1 / 0, events="PreToolUse", priority=1)
    registry.register("denier", lambda e: {"outcome": "deny"}, events="PreToolUse", priority=2)
    decision = registry.run(pre())
    assert decision.outcome == "deny"
    assert decision.trace[0].outcome == "error"


def test_an_isolated_hook_that_overruns_the_deadline_is_abandoned_with_a_timeout() -> None:
    registry = HookRegistry()
    release = threading.Event()

    def stuck(event: Event) -> None:
        release.wait(5)

    registry.register(
        "stuck", stuck, events="PreToolUse", on_error="deny", isolate=True, timeout_s=5
    )
    started = time.monotonic()
    decision = registry.run(pre(), time_left_s=0.2)
    elapsed = time.monotonic() - started
    release.set()

    assert decision.outcome == "deny"
    assert decision.trace[0].outcome == "timeout"
    assert elapsed < 1.0


def test_a_hook_gets_its_own_timeout_when_it_is_shorter_than_the_time_left() -> None:
    registry = HookRegistry()
    release = threading.Event()
    registry.register(
        "slow", lambda e: release.wait(5), events="PreToolUse", timeout_s=0.1, isolate=True
    )
    started = time.monotonic()
    decision = registry.run(pre(), time_left_s=10)
    release.set()
    assert decision.trace[0].outcome == "timeout"
    assert time.monotonic() - started < 1.0


def test_an_inline_hook_that_overran_its_timeout_counts_as_a_timeout() -> None:
    registry = HookRegistry()
    registry.register(
        "slowish", lambda e: time.sleep(0.05), events="PreToolUse", timeout_s=0.01, on_error="deny"
    )
    decision = registry.run(pre())
    assert decision.outcome == "deny"
    assert decision.trace[0].outcome == "timeout"


def test_no_time_left_means_each_hook_times_out_and_on_error_decides() -> None:
    registry = HookRegistry()
    calls: list[str] = []
    registry.register("a", recorder(calls, "a"), events="PreToolUse")
    decision = registry.run(pre(), time_left_s=0)
    assert calls == []
    assert decision.outcome == "allow"
    assert decision.trace[0].outcome == "timeout"


def test_an_async_hook_is_cancelled_at_its_timeout() -> None:
    import asyncio

    registry = HookRegistry()
    finished: list[bool] = []

    async def slow(event: Event) -> None:
        await asyncio.sleep(2)
        finished.append(True)

    registry.register("slow-async", slow, events="PreToolUse", timeout_s=0.05, on_error="deny")
    decision = registry.run(pre())
    assert decision.outcome == "deny"
    assert decision.trace[0].outcome == "timeout"
    assert finished == []


# --- dynamic hooks, snapshots, matching, run_hook -------------------------------------------


def manifest(
    tmp_path: Path,
    name: str,
    body: str,
    *,
    priority: int = 100,
    events: str = "PreToolUse",
    extra: str = "",
) -> HookManifest:
    folder = tmp_path / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "handler.py").write_text(body)
    text = (
        f'name = "{name}"\nevents = ["{events}"]\npriority = {priority}\n{extra}\n'
        '[action.python]\nentrypoint = "handler:run"\n'
    )
    return parse_toml(text, folder / "HOOK.toml")


def test_replace_dynamic_swaps_manifest_hooks_and_keeps_static_ones(tmp_path: Path) -> None:
    registry = HookRegistry()
    calls: list[str] = []
    registry.register("static", recorder(calls, "static"), events="PreToolUse", priority=1)
    old = manifest(tmp_path / "v1", "old", "def run(e):\n    return {'context': 'old'}\n")
    new = manifest(tmp_path / "v2", "new", "def run(e):\n    return {'context': 'new'}\n")

    assert registry.replace_dynamic([old], version="v1") == []
    first = registry.run(pre())
    registry.replace_dynamic([new], version="v2")
    second = registry.run(pre())

    assert first.context == ["old"] and first.bundle_version == "v1"
    assert second.context == ["new"] and second.bundle_version == "v2"
    assert calls == ["static", "static"]
    assert registry.version == "v2"
    assert [(h.id, h.source) for h in registry.hooks()] == [
        ("static", "static"),
        ("new", "dynamic"),
    ]


def test_manifests_with_equal_priority_run_in_name_order(tmp_path: Path) -> None:
    registry = HookRegistry()
    answer = "def run(e):\n    return {'context': __name__.rsplit('_', 1)[0][-1:]}\n"
    hooks = [
        manifest(tmp_path, n, answer.replace("__name__.rsplit('_', 1)[0][-1:]", repr(n)))
        for n in ["zeta", "alpha", "mid"]
    ]
    registry.replace_dynamic(hooks)
    assert registry.run(pre()).context == ["alpha", "mid", "zeta"]


def test_a_manifest_that_cannot_register_is_reported_and_the_rest_swap_in(tmp_path: Path) -> None:
    registry = HookRegistry()
    good = manifest(tmp_path, "good", "def run(e):\n    return None\n")
    bad = manifest(tmp_path, "bad", "raise ImportError('broken module')\n")

    errors = registry.replace_dynamic([good, bad], version="v3")

    assert [e.hook_id for e in errors] == ["bad"]
    assert "broken module" in str(errors[0])
    assert [h.id for h in registry.hooks()] == ["good"]
    with pytest.raises(HookRegistrationError):
        registry.replace_dynamic([good, bad], version="v4", strict=True)
    assert registry.version == "v3"


def test_a_wake_action_registers_and_says_what_it_runs(tmp_path: Path) -> None:
    folder = tmp_path / "waker"
    folder.mkdir()
    text = 'name = "waker"\nevents = ["Stop"]\n[action.wake]\ncommand = "notify {agent_id}"\n'
    wake = parse_toml(text, folder / "HOOK.toml")
    registry = HookRegistry()
    assert registry.replace_dynamic([wake]) == []
    hook = registry.get("waker")
    assert hook is not None and hook.handler.startswith("wake: notify")


def test_a_run_in_flight_finishes_on_the_hook_set_it_started_with(tmp_path: Path) -> None:
    registry = HookRegistry()
    entered, release = threading.Event(), threading.Event()

    def first(event: Event) -> None:
        entered.set()
        release.wait(5)

    registry.register("first", first, events="PreToolUse", priority=1)
    old = manifest(tmp_path / "a", "second", "def run(e):\n    return {'context': 'old set'}\n")
    new = manifest(tmp_path / "b", "second", "def run(e):\n    return {'context': 'new set'}\n")
    registry.replace_dynamic([old], version="old")
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(registry.run(pre())))
    worker.start()
    assert entered.wait(5)
    registry.replace_dynamic([new], version="new")
    release.set()
    worker.join(5)

    assert result[0].context == ["old set"]
    assert result[0].bundle_version == "old"
    assert registry.run(pre()).context == ["new set"]


def test_disabled_manifests_are_listed_but_never_run(tmp_path: Path) -> None:
    registry = HookRegistry()
    off = manifest(
        tmp_path, "off", "def run(e):\n    return {'outcome': 'deny'}\n", extra="enabled = false"
    )
    registry.replace_dynamic([off])
    assert registry.run(pre()).outcome == "allow"
    assert [(h.id, h.enabled) for h in registry.hooks()] == [("off", False)]
    assert registry.matching(pre()) == []


def test_matching_lists_the_enabled_hooks_whose_conditions_hold() -> None:
    registry = HookRegistry()
    registry.register("bash-only", lambda e: None, events="PostToolUse", match={"tools": ["Bash"]})
    registry.register("write-only", lambda e: None, events="PostToolUse", match={"tools": "Write"})
    registry.register("all", lambda e: None, events="PostToolUse")
    assert [h.id for h in registry.matching(post())] == ["bash-only", "all"]


def test_a_hook_whose_conditions_do_not_hold_is_not_run() -> None:
    registry = HookRegistry()
    calls: list[str] = []
    registry.register(
        "slow-only", recorder(calls, "x"), events="PostToolUse", match={"min_duration_ms": 100}
    )
    registry.run(post(duration_ms=5))
    registry.run(post(duration_ms=500))
    assert calls == ["x"]


def test_run_hook_returns_the_trace_entry_and_raises_on_failure() -> None:
    registry = HookRegistry()
    registry.register("ok", lambda e: None, events="PostToolUse")
    registry.register("broken", lambda e: 1 / 0, events="PostToolUse")
    registry.register("batch", lambda events: {"logs": [str(len(events))]}, events="PostToolUse")

    run = registry.run_hook("ok", post())
    assert (run.hook_id, run.outcome) == ("ok", "continue")
    with pytest.raises(HookExecutionError, match="ZeroDivisionError"):
        registry.run_hook("broken", post())
    assert registry.run_hook("batch", [post(), post()]).outcome == "continue"
    with pytest.raises(HookNotFound):
        registry.run_hook("gone", post())


def test_run_hook_raises_hook_timeout_for_an_overrunning_hook() -> None:
    registry = HookRegistry()
    registry.register("slow", lambda e: time.sleep(0.05), events="PostToolUse")
    with pytest.raises(HookTimeout):
        registry.run_hook("slow", post(), timeout_s=0.01)


def test_run_one_never_raises_and_reports_the_failure() -> None:
    registry = HookRegistry()
    registry.register("broken", lambda e: 1 / 0, events="PreToolUse")
    result, run = registry.run_one("broken", pre())
    assert result is None
    assert run.outcome == "error" and "ZeroDivisionError" in (run.error or "")


def test_concurrent_runs_and_registrations_do_not_interfere() -> None:
    registry = HookRegistry()
    registry.register("base", lambda e: None, events="PreToolUse")
    errors: list[BaseException] = []
    stop = threading.Event()

    def churn() -> None:
        i = 0
        while not stop.is_set() and i < 2000:
            registry.register(f"tmp{i % 5}", lambda e: None, events="PreToolUse")
            registry.deregister(f"tmp{(i + 2) % 5}")
            i += 1

    def runner() -> None:
        try:
            for _ in range(2000):
                decision = registry.run(pre())
                assert decision.outcome == "allow"
        except BaseException as exc:  # pragma: no cover - only on failure
            errors.append(exc)

    threads = [threading.Thread(target=churn), threading.Thread(target=runner)]
    for t in threads:
        t.start()
    threads[1].join(30)
    stop.set()
    threads[0].join(30)
    assert errors == []


# --- manifest-only chain features ------------------------------------------------------------


def toml_manifest(tmp_path: Path, name: str, body: str) -> HookManifest:
    folder = tmp_path / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "handler.py").write_text("def run(event):\n    return None\n")
    return parse_toml(f'name = "{name}"\n{body}', folder / "HOOK.toml")


def test_prompt_inject_prepends_or_appends_to_the_context(tmp_path: Path) -> None:
    first = toml_manifest(
        tmp_path,
        "a-append",
        'events = ["PromptSubmit"]\npriority = 1\n[action.prompt_inject]\ncontent = "after"\n',
    )
    second = toml_manifest(
        tmp_path,
        "b-prepend",
        'events = ["PromptSubmit"]\npriority = 2\n[action.prompt_inject]\n'
        'content = "before"\nposition = "prepend"\n',
    )
    registry = HookRegistry()
    registry.register("code", lambda e: {"context": "middle"}, events="PromptSubmit", priority=1)
    registry.replace_dynamic([first, second])
    assert registry.run(Event(kind="PromptSubmit")).context == ["before", "middle", "after"]


def test_a_manifest_changes_only_its_allow_keys(tmp_path: Path) -> None:
    hook = manifest(
        tmp_path,
        "rewriter",
        "def run(e):\n    return {'updated': {'tool_input': {'command': 'ls', 'timeout': 1}}}\n",
        extra='[modify]\nallow_keys = ["tool_input.command"]',
    )
    registry = HookRegistry()
    registry.replace_dynamic([hook])
    decision = registry.run(pre(tool_input={"command": "ls -R /", "timeout": 60}))
    assert decision.updated == {"tool_input": {"command": "ls", "timeout": 60}}
    assert decision.trace[0].notes == [
        "dropped change to 'tool_input.timeout': not in this hook's modify.allow_keys"
    ]


def test_a_blocking_false_manifest_marked_inline_is_advisory_in_the_chain(tmp_path: Path) -> None:
    advisory = manifest(
        tmp_path,
        "advisor",
        "def run(e):\n    return {'outcome': 'deny'}\n",
        extra='blocking = false\ninline = true\non_error = "deny"',
    )
    registry = HookRegistry()
    calls: list[str] = []
    registry.register("after", recorder(calls, "after"), events="PreToolUse", priority=200)
    registry.replace_dynamic([advisory])
    decision = registry.run(pre())
    assert decision.outcome == "allow"
    assert calls == ["after"]
    assert decision.trace[0].outcome == "deny"
    assert "not enforced" in decision.trace[0].notes[0]


def test_a_blocking_false_manifest_observes_requests_outside_the_chain(tmp_path: Path) -> None:
    observer = manifest(
        tmp_path,
        "observer",
        "def run(e):\n    return {'outcome': 'deny'}\n",
        extra="blocking = false",
    )
    registry = HookRegistry()
    calls: list[str] = []
    registry.register("guard", recorder(calls, "guard"), events="PreToolUse")
    registry.replace_dynamic([observer])
    decision = registry.run(pre())
    assert (decision.outcome, calls) == ("allow", ["guard"])
    assert [run.hook_id for run in decision.trace] == ["guard"]
    assert registry.observes("PreToolUse") and not registry.observes("Stop")
    assert [h.id for h in registry.matching(pre())] == ["guard", "observer"]


def test_inline_without_blocking_false_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="only a blocking = false hook runs inline"):
        manifest(tmp_path, "bad", "def run(e):\n    return None\n", extra="inline = true")


def test_an_ability_guard_signal_from_a_seed_001_hook_denies(tmp_path: Path) -> None:
    hook = manifest(
        tmp_path,
        "prod-guard",
        "def run(e):\n    return {'hook_signals': [{'kind': 'ability_guard', "
        "'code': 'ABILITY_DENIED', 'payload': {'reason': 'prod config'}}]}\n",
    )
    registry = HookRegistry()
    registry.replace_dynamic([hook])
    decision = registry.run(Event(kind="PreAbilityCall", payload={"ability_id": "edit_file"}))
    assert (decision.outcome, decision.reason) == ("deny", "prod config")
    assert decision.signals[0].code == "ABILITY_DENIED"


def test_a_hanging_post_hook_times_out_and_the_others_still_run() -> None:
    registry = HookRegistry()
    gate = threading.Event()
    calls: list[str] = []
    registry.register(
        "hangs",
        lambda e: gate.wait(5),
        events="PostToolUse",
        isolate=True,
        timeout_s=0.05,
        priority=1,
    )
    registry.register("after", recorder(calls, "after"), events="PostToolUse", priority=2)
    try:
        decision = registry.run(post())
    finally:
        gate.set()
    assert [r.outcome for r in decision.trace] == ["timeout", "continue"]
    assert calls == ["after"]
