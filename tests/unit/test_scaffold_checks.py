"""What ``hookbus hooks create`` writes passes ``hooks validate`` and ``hooks audit`` as
written, for every action kind it scaffolds and every event: no timeout past the event's
deadline, no URL the audit flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookbus.audit.folder import audit_folder
from hookbus.authoring.scaffold import SCAFFOLD_ACTIONS, create_hook
from hookbus.bus.kinds import DEFAULT_CATALOGUE
from hookbus.bus.settings.loader import Settings
from hookbus.hooks.loader import deadline_warnings, load_hooks


@pytest.mark.parametrize("event", DEFAULT_CATALOGUE.kinds())
@pytest.mark.parametrize("action", SCAFFOLD_ACTIONS)
def test_a_scaffold_passes_validate_and_audit_as_written(
    action: str, event: str, tmp_path: Path
) -> None:
    settings = Settings()
    create_hook(tmp_path, "fresh", event, action=action, deadline_ms=settings.deadline_ms)

    loaded = load_hooks(tmp_path)
    assert loaded.problems == [] and [h.name for h in loaded.hooks] == ["fresh"]
    warnings = deadline_warnings(loaded.hooks, settings.deadline_ms, DEFAULT_CATALOGUE)
    assert warnings == [], [str(w) for w in warnings]
    report = audit_folder(tmp_path, settings=settings)
    assert report.findings == [], [f"{f.severity} {f.rule}: {f.message}" for f in report.findings]


def test_a_scaffold_keeps_within_a_configured_deadline(tmp_path: Path) -> None:
    settings = Settings(deadlines={"PreToolUse": 100})
    create_hook(tmp_path, "tight", "PreToolUse", action="python", deadline_ms=settings.deadline_ms)
    loaded = load_hooks(tmp_path)
    assert deadline_warnings(loaded.hooks, settings.deadline_ms, DEFAULT_CATALOGUE) == []
    assert loaded.hooks[0].timeout_s * 1000 <= 100


@pytest.mark.parametrize("event", DEFAULT_CATALOGUE.kinds())
def test_a_scaffold_for_a_blocking_kind_fails_closed_and_an_observer_fails_open(
    event: str, tmp_path: Path
) -> None:
    create_hook(tmp_path, "fresh", event, action="shell")
    (hook,) = load_hooks(tmp_path).hooks
    blocking = DEFAULT_CATALOGUE.resolve(event).blocking
    assert hook.on_error == ("deny" if blocking else "allow")
