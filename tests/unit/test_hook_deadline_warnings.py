"""deadline_warnings: a blocking hook whose timeout outlasts its kind's deadline (row 14)."""

from __future__ import annotations

from pathlib import Path

from hookbus.bus.settings.schema import Settings
from hookbus.hooks.loader import deadline_warnings, load_hooks


def _hook(root: Path, name: str, body: str) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "HOOK.toml").write_text(f'name = "{name}"\n{body}')
    (folder / "run.sh").write_text("#!/bin/sh\n")


def test_only_enabled_blocking_hooks_past_their_kind_s_deadline_are_warned_about(
    tmp_path: Path,
) -> None:
    shell = '[action.shell]\ncommand = ["./run.sh"]\n'
    _hook(tmp_path, "slow", 'events = ["PreToolUse", "LLMOutput"]\n' + shell)
    _hook(tmp_path, "quick", 'events = ["PreToolUse"]\n' + shell + "timeout_secs = 0.25\n")
    _hook(tmp_path, "advisory", 'events = ["PreToolUse"]\nblocking = false\n' + shell)
    _hook(tmp_path, "off", 'events = ["PreToolUse"]\nenabled = false\n' + shell)
    # fan-out only: a non-blocking-by-default kind without blocking = true
    _hook(tmp_path, "telemetry", 'events = ["PostToolUse"]\n' + shell)
    _hook(
        tmp_path, "reminder", 'events = ["PromptSubmit"]\n[action.prompt_inject]\ncontent = "x"\n'
    )
    _hook(tmp_path, "stop-guard", 'events = ["Stop"]\nblocking = true\n' + shell)
    report = load_hooks(tmp_path)
    assert report.ok, report.problems
    settings = Settings()
    warned = deadline_warnings(report.hooks, settings.deadline_ms, settings.catalogue())
    assert sorted((w.hook, w.field) for w in warned) == [
        ("slow", "timeout_secs"),
        ("stop-guard", "timeout_secs"),
    ]
    warned = [w for w in warned if w.hook == "slow"]
    assert "250 ms deadline of blocking PreToolUse" in warned[0].reason
    # a longer deadline for the kind: nothing to say
    patient = Settings(deadlines={"PreToolUse": 20_000, "Stop": 20_000})
    assert deadline_warnings(report.hooks, patient.deadline_ms, patient.catalogue()) == []
