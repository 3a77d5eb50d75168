"""Shadow hooks (issue 15 point 3): ``mode = "shadow"`` runs on live blocking requests and
records what it would have decided on ``Decision.shadow``, never changing the answer."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hookbus.bus.wire import Decision, Event, ShadowRun, decode, encode
from hookbus.errors import HookRegistrationError, ManifestError
from hookbus.hooks.compiled import SHADOW_NOT_LOADED
from hookbus.hooks.manifest import HookManifest, parse_toml
from hookbus.hooks.registry import HookRegistry

DENY_RM = (
    "def run(e):\n"
    "    if 'rm' in e.payload.get('tool_input', {}).get('command', ''):\n"
    "        return {'outcome': 'deny', 'reason': 'no rm'}\n"
    "    return None\n"
)
REWRITE = (
    "def run(e):\n"
    "    return {'updated': {'tool_input': {'command': 'ls'}}, 'context': ['hi'],\n"
    "            'signals': [{'kind': 'routing_hint'}]}\n"
)

ALLOW_KEYS = '[modify]\nallow_keys = ["tool_input"]'


def manifest(
    tmp_path: Path,
    name: str,
    body: str,
    *,
    mode: str = "enforce",
    events: str = '["PreToolUse"]',
    extra: str = "",
) -> HookManifest:
    folder = tmp_path / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "handler.py").write_text(body)
    text = (
        f'name = "{name}"\nevents = {events}\nmode = "{mode}"\n{extra}\n'
        '[action.python]\nentrypoint = "handler:run"\n'
    )
    return parse_toml(text, folder / "HOOK.toml")


def request(command: str) -> Event:
    return Event(
        kind="PreToolUse",
        reply_to="r",
        payload={"tool_name": "Bash", "tool_input": {"command": command}},
    )


def registry_with(*manifests: HookManifest) -> HookRegistry:
    registry = HookRegistry()
    assert registry.replace_dynamic(manifests, version="v1") == []
    return registry


def test_a_manifest_is_enforcing_unless_it_says_shadow(tmp_path: Path) -> None:
    assert manifest(tmp_path, "a", DENY_RM).mode == "enforce"
    assert manifest(tmp_path, "b", DENY_RM, mode="shadow").mode == "shadow"


def test_an_unknown_mode_is_refused_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as info:
        manifest(tmp_path, "a", DENY_RM, mode="dry-run")
    assert "mode" in str(info.value)


def test_a_shadow_hook_on_a_kind_that_never_blocks_is_refused_with_what_to_do(
    tmp_path: Path,
) -> None:
    with pytest.raises(ManifestError) as info:
        manifest(tmp_path, "a", DENY_RM, mode="shadow", events='["SessionEnd"]')
    assert "SessionEnd can never block" in str(info.value)


def test_a_shadow_deny_is_recorded_and_the_request_is_still_allowed(tmp_path: Path) -> None:
    registry = registry_with(manifest(tmp_path, "trial-guard", DENY_RM, mode="shadow"))

    decision = registry.run(request("rm -rf /"), time_left_s=1.0)

    assert decision.outcome == "allow"
    assert decision.trace == []
    (run,) = decision.shadow
    assert (run.hook, run.outcome, run.reason) == ("trial-guard", "deny", "no rm")
    assert run.duration_us >= 0


def test_shadow_hooks_leave_the_enforcing_chains_answer_untouched(tmp_path: Path) -> None:
    enforcing = manifest(tmp_path, "rewrite", REWRITE, extra=ALLOW_KEYS)
    alone = registry_with(enforcing).run(request("rm x"), time_left_s=1.0)
    both = registry_with(
        enforcing,
        manifest(tmp_path, "trial-rewrite", REWRITE, mode="shadow", extra=ALLOW_KEYS),
        manifest(tmp_path, "trial-guard", DENY_RM, mode="shadow"),
    ).run(request("rm x"), time_left_s=1.0)

    assert both.outcome == alone.outcome == "allow"
    assert both.updated == alone.updated == {"tool_input": {"command": "ls"}}
    assert both.context == alone.context == ["hi"]
    assert both.signals == alone.signals
    assert [r.hook_id for r in both.trace] == ["rewrite"]
    # the shadow guard sees the event as the agent sent it, not the rewritten one
    assert [(r.hook, r.outcome) for r in both.shadow] == [
        ("trial-guard", "deny"),
        ("trial-rewrite", "continue"),
    ]


def test_an_enforcing_deny_still_lets_shadow_hooks_say_what_they_would_have_done(
    tmp_path: Path,
) -> None:
    registry = registry_with(
        manifest(tmp_path, "guard", DENY_RM),
        manifest(tmp_path, "trial", "def run(e):\n    return None\n", mode="shadow"),
    )
    decision = registry.run(request("rm -rf /"), time_left_s=1.0)
    assert decision.outcome == "deny"
    assert [(r.hook, r.outcome) for r in decision.shadow] == [("trial", "continue")]


def test_a_shadow_hook_that_raises_is_recorded_as_an_error_and_changes_nothing(
    tmp_path: Path,
) -> None:
    registry = registry_with(
        manifest(
            tmp_path,
            "broken",
            "def run(e):\n    raise RuntimeError('boom')\n",
            mode="shadow",
            extra='on_error = "deny"',
        )
    )
    decision = registry.run(request("ls"), time_left_s=1.0)
    assert decision.outcome == "allow" and not decision.degraded
    (run,) = decision.shadow
    assert run.outcome == "error" and "boom" in (run.reason or "")


def test_a_slow_shadow_hook_times_out_within_the_time_left_and_the_answer_stays(
    tmp_path: Path,
) -> None:
    slow = "import time\ndef run(e):\n    time.sleep(2)\n    return {'outcome': 'deny'}\n"
    registry = registry_with(
        manifest(tmp_path, "slow", slow, mode="shadow", extra='on_error = "deny"')
    )
    started = time.perf_counter()
    decision = registry.run(request("ls"), time_left_s=0.2)
    took = time.perf_counter() - started

    assert decision.outcome == "allow"
    (run,) = decision.shadow
    assert run.outcome == "timeout"
    assert took < 1.0


def test_shadow_hooks_are_skipped_without_running_when_the_chain_used_all_the_time(
    tmp_path: Path,
) -> None:
    calls = tmp_path / "calls"
    counting = f"def run(e):\n    open({str(calls)!r}, 'a').write('x')\n    return None\n"
    registry = registry_with(manifest(tmp_path, "trial", counting, mode="shadow"))

    def slow_guard(event: Any) -> None:
        time.sleep(0.15)

    registry.register("slow-guard", slow_guard, events="PreToolUse")
    decision = registry.run(request("ls"), time_left_s=0.1)

    (run,) = decision.shadow
    assert run.outcome == "skipped" and "no time left" in (run.reason or "")
    assert not calls.exists()


def test_shadow_hooks_do_not_run_on_non_blocking_events_nor_in_fan_out_matching(
    tmp_path: Path,
) -> None:
    registry = registry_with(
        manifest(tmp_path, "trial", DENY_RM, mode="shadow", events='["PostToolUse"]')
    )
    # PostToolUse blocks only when sent as a request; published, it goes to the fan-out
    fire_and_forget = Event(kind="PostToolUse", payload={"tool_input": {"command": "rm"}})

    assert registry.run(fire_and_forget).shadow == []
    assert registry.matching(fire_and_forget) == []
    assert [(h.id, h.mode) for h in registry.hooks()] == [("trial", "shadow")]


def test_a_disabled_shadow_hook_does_not_run(tmp_path: Path) -> None:
    registry = registry_with(
        manifest(tmp_path, "trial", DENY_RM, mode="shadow", extra="enabled = false")
    )
    assert registry.run(request("rm"), time_left_s=1.0).shadow == []


def test_the_shadow_record_survives_the_wire() -> None:
    decision = Decision(shadow=[ShadowRun(hook="g", outcome="deny", reason="r", duration_us=3)])
    assert decode(encode(decision), Decision).shadow == decision.shadow


def test_hooks_list_and_info_say_which_hooks_are_shadow(tmp_path: Path) -> None:
    for name, mode in (("trial", "shadow"), ("guard", "enforce")):
        manifest(tmp_path, name, DENY_RM, mode=mode)
        (tmp_path / name / "HOOK.toml").write_text(
            f'name = "{name}"\nevents = ["PreToolUse"]\nmode = "{mode}"\n'
            '[action.python]\nentrypoint = "handler:run"\n'
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(COLUMNS="120", XDG_RUNTIME_DIR=str(tmp_path))

    def hookbus(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "hookbus", "hooks", *args, "--dir", str(tmp_path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    rows = {cells[0]: cells for cells in map(str.split, hookbus("list").splitlines()) if cells}
    assert rows["trial"][3] == "shadow" and rows["guard"][3] == "true"
    assert re.search(r"^\s*mode\s+shadow\s*$", hookbus("info", "trial"), re.M)


def test_a_shadow_hook_that_does_not_register_is_reported_as_a_trial_that_did_not_load(
    tmp_path: Path,
) -> None:
    broken = manifest(tmp_path, "trial", "import no_such_module_here\n", mode="shadow")
    guard = manifest(tmp_path, "guard", DENY_RM)
    registry = HookRegistry()

    (error,) = registry.replace_dynamic([broken, guard], version="v1")

    assert error.hook_id == "trial"
    assert str(error).startswith(f"hook 'trial': {SHADOW_NOT_LOADED}: ")
    assert registry.run(request("rm -rf /"), time_left_s=1.0).outcome == "deny"
    with pytest.raises(HookRegistrationError) as strict:
        registry.replace_dynamic([broken], strict=True)
    assert SHADOW_NOT_LOADED not in str(strict.value)  # a release refuses it as it is


def test_a_worker_missing_only_a_shadow_hook_still_answers_from_its_chain(
    tmp_path: Path,
) -> None:
    from hookbus.workers.reload.health import incomplete_reason

    broken_trial = manifest(tmp_path / "a", "trial", "import nope_missing\n", mode="shadow")
    broken_guard = manifest(tmp_path / "b", "guard", "import nope_missing\n")

    def problems(*manifests: HookManifest) -> list[str]:
        return [str(e) for e in HookRegistry().replace_dynamic(manifests, version="v1")]

    assert incomplete_reason({"version": "v1", "problems": problems(broken_trial)}) is None
    reason = incomplete_reason({"version": "v1", "problems": problems(broken_guard)})
    assert reason is not None and "guard" in reason
