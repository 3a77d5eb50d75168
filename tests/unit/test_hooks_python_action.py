"""Python actions from manifests: import from the hook folder, caching, isolation, async."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from hookbus.bus.wire import Event
from hookbus.errors import HookRegistrationError
from hookbus.hooks.actions.python import resolve_entrypoint
from hookbus.hooks.manifest import HookManifest, parse_toml
from hookbus.hooks.registry import HookRegistry


def python_hook(
    tmp_path: Path,
    body: str,
    *,
    name: str = "py",
    entrypoint: str = "handler:run",
    action_extra: str = "",
    extra: str = "",
) -> HookManifest:
    folder = tmp_path / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "handler.py").write_text(body)
    text = (
        f'name = "{name}"\nevents = ["PreToolUse"]\n{extra}\n'
        f'[action.python]\nentrypoint = "{entrypoint}"\n{action_extra}\n'
    )
    return parse_toml(text, folder / "HOOK.toml")


def test_a_missing_function_is_refused_at_registration_naming_the_file(tmp_path: Path) -> None:
    hook = python_hook(tmp_path, "def other(event):\n    return None\n")
    with pytest.raises(HookRegistrationError) as info:
        HookRegistry().register_manifest(hook)
    assert "has no function 'run'" in str(info.value)
    assert "handler.py" in str(info.value)


def test_a_module_that_fails_to_import_is_refused_with_its_error(tmp_path: Path) -> None:
    hook = python_hook(tmp_path, "import no_such_dependency_xyz\n")
    with pytest.raises(HookRegistrationError, match="no_such_dependency_xyz"):
        HookRegistry().register_manifest(hook)


def test_a_handler_with_the_wrong_signature_is_refused(tmp_path: Path) -> None:
    hook = python_hook(tmp_path, "def run():\n    return None\n")
    with pytest.raises(HookRegistrationError, match="exactly one argument"):
        HookRegistry().register_manifest(hook)


def test_the_module_is_imported_once_and_cached(tmp_path: Path) -> None:
    body = (
        "from pathlib import Path\n"
        "with (Path(__file__).parent / 'imports.log').open('a') as fh:\n"
        "    fh.write('imported\\n')\n"
        "def run(event):\n    return None\n"
    )
    hook = python_hook(tmp_path, body)
    first = resolve_entrypoint("py", "handler:run", hook.folder)
    second = resolve_entrypoint("py", "handler:run", hook.folder)
    registry = HookRegistry()
    registry.replace_dynamic([hook])
    registry.replace_dynamic([hook])
    registry.run(Event(kind="PreToolUse"))
    assert first is second
    assert (hook.folder / "imports.log").read_text() == "imported\n"


def test_an_importable_module_outside_the_folder_works(tmp_path: Path) -> None:
    hook = python_hook(tmp_path, "", entrypoint="builtins:repr")
    registry = HookRegistry()
    registry.register_manifest(hook)
    decision = registry.run(Event(kind="PreToolUse"))
    # repr returns a string: not an accepted answer, so an error, not a crash
    assert decision.trace[0].outcome == "error"
    assert "returned str" in (decision.trace[0].error or "")


def test_a_manifest_hook_under_a_deadline_is_abandoned_when_it_hangs(tmp_path: Path) -> None:
    body = (
        "import threading\nGATE = threading.Event()\n"
        "def run(event):\n    GATE.wait(5)\n    return {'outcome': 'deny'}\n"
    )
    hook = python_hook(tmp_path, body, extra='on_error = "deny"', action_extra="timeout_secs = 5")
    registry = HookRegistry()
    registry.register_manifest(hook)
    gate = resolve_entrypoint("py", "handler:run", hook.folder).__globals__["GATE"]
    started = time.monotonic()
    decision = registry.run(Event(kind="PreToolUse"), time_left_s=0.2)
    elapsed = time.monotonic() - started
    gate.set()
    assert decision.outcome == "deny"
    assert decision.trace[0].outcome == "timeout"
    assert "abandoned" in (decision.trace[0].error or "")
    assert elapsed < 1.5


def test_isolate_false_keeps_a_manifest_hook_inline_even_under_a_deadline(tmp_path: Path) -> None:
    body = (
        "import threading\n"
        "def run(event):\n    return {'context': threading.current_thread().name}\n"
    )
    inline = python_hook(tmp_path / "a", body, action_extra="isolate = false")
    auto = python_hook(tmp_path / "b", body)
    registry = HookRegistry()
    registry.register_manifest(inline)
    here = threading.current_thread().name
    assert registry.run(Event(kind="PreToolUse"), time_left_s=1).context == [here]
    registry.register_manifest(auto)  # same name: replaces the inline one
    threaded = registry.run(Event(kind="PreToolUse"), time_left_s=1).context
    assert threaded != [here] and threaded[0].startswith("hookbus-hook-")
    assert registry.run(Event(kind="PreToolUse")).context == [here]


def test_an_async_hook_called_from_inside_an_event_loop_still_runs(tmp_path: Path) -> None:
    body = (
        "import asyncio\nasync def run(event):\n    await asyncio.sleep(0)\n"
        "    return {'outcome': 'deny', 'reason': 'async'}\n"
    )
    registry = HookRegistry()
    registry.register_manifest(python_hook(tmp_path, body))

    async def main() -> str:
        return registry.run(Event(kind="PreToolUse")).outcome

    assert asyncio.run(main()) == "deny"


def test_an_abandoned_thread_does_not_block_the_next_run(tmp_path: Path) -> None:
    registry = HookRegistry()
    gate = threading.Event()
    registry.register(
        "stuck", lambda e: gate.wait(5), events="PreToolUse", isolate=True, timeout_s=0.05
    )
    registry.register(
        "quick", lambda e: {"context": "ok"}, events="PreToolUse", isolate=True, timeout_s=1
    )
    first = registry.run(Event(kind="PreToolUse"))
    second = registry.run(Event(kind="PreToolUse"))
    gate.set()
    assert [r.outcome for r in first.trace] == ["timeout", "continue"]
    assert second.context == ["ok"]


def test_isolated_calls_fail_fast_once_too_many_threads_are_stuck(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hookbus.hooks.actions import hook_threads

    pool = hook_threads._DaemonPool()
    monkeypatch.setattr(hook_threads, "_pool", pool)
    monkeypatch.setattr(hook_threads, "MAX_HOOK_THREADS", 2)
    gate = threading.Event()
    registry = HookRegistry()
    registry.register(
        "hang", lambda e: gate.wait(5), events="PreToolUse", isolate=True, timeout_s=0.02
    )
    try:
        traces = [registry.run(Event(kind="PreToolUse")).trace[0] for _ in range(3)]
    finally:
        gate.set()
    # a hook that cannot get a thread did not answer in time: a timeout, by its on_error
    assert [t.outcome for t in traces] == ["timeout", "timeout", "timeout"]
    assert "hook threads are busy" in (traces[2].error or "")


def test_a_hanging_hook_past_its_cap_is_refused_and_other_hooks_keep_their_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hookbus.hooks.actions import hook_threads

    monkeypatch.setattr(hook_threads, "_pool", hook_threads._DaemonPool())
    monkeypatch.setattr(hook_threads, "MAX_HOOK_THREADS", 4)
    monkeypatch.setattr(hook_threads, "HOOK_ABANDONED_CAP", 2)
    monkeypatch.setattr(hook_threads, "_slots", {})  # no other test's hung hooks
    gate = threading.Event()
    registry = HookRegistry()
    registry.register(
        "capped-hang", lambda e: gate.wait(5), events="PreToolUse", isolate=True, timeout_s=0.02
    )
    registry.register(
        "capped-fine", lambda e: {"context": ["ok"]}, events="PreToolUse", isolate=True
    )
    try:
        decisions = [registry.run(Event(kind="PreToolUse"), time_left_s=1.0) for _ in range(6)]
        at_cap = hook_threads.hooks_at_cap()
    finally:
        gate.set()
    errors = [d.trace[0].error or "" for d in decisions]
    assert ["concurrency cap" in e for e in errors] == [False, False, True, True, True, True]
    for decision in decisions:
        assert [r.outcome for r in decision.trace] == ["timeout", "continue"]
        assert decision.context == ["ok"]
        assert decision.outcome == "allow" and decision.degraded is True
        assert decision.reason is not None and "capped-hang" in decision.reason
    assert at_cap == {"capped-hang": {"abandoned": 2, "running": 2, "cap": 2, "refused": 4}}


def test_a_burst_of_calls_that_return_in_time_is_never_refused_by_the_cap() -> None:
    from hookbus.hooks.actions import hook_threads

    registry = HookRegistry()
    registry.register(
        "bursty", lambda e: time.sleep(0.05), events="PreToolUse", isolate=True, timeout_s=5
    )
    count = hook_threads.HOOK_ABANDONED_CAP * 3
    barrier = threading.Barrier(count)
    outcomes: list[str] = []

    def ask() -> None:
        barrier.wait()
        decision = registry.run(Event(kind="PreToolUse"), time_left_s=5.0)
        outcomes.append(decision.trace[0].outcome)

    threads = [threading.Thread(target=ask) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert outcomes == ["continue"] * count


def test_a_reloaded_folder_runs_its_new_code_and_leaves_sys_path_and_old_modules_behind(
    tmp_path: Path,
) -> None:
    import shutil
    import sys

    from hookbus.hooks.actions.python import resolve_entrypoint

    path_before = list(sys.path)
    folders = []
    for word in ("one", "two"):
        folder = tmp_path / word / "hook"
        (folder / "reloadpkg").mkdir(parents=True)
        (folder / "reloadpkg" / "__init__.py").write_text("")
        (folder / f"only_{word}.py").write_text(f"WORD = '{word}'\n")  # no namesake later
        (folder / "reloadpkg" / "rules.py").write_text(
            f"import only_{word}\n\ndef check(event):\n    return only_{word}.WORD\n"
        )
        fn = resolve_entrypoint("reloaded", "reloadpkg.rules:check", folder)
        assert fn(None) == word
        assert sys.path == path_before
        folders.append(folder.resolve())
        if word == "one":  # the bundle cache cleaned the old version up
            shutil.rmtree(tmp_path / word)
    left = [
        name
        for name, module in sys.modules.items()
        if str(getattr(module, "__file__", "") or "").startswith(str(folders[0]))
    ]
    assert left == []
