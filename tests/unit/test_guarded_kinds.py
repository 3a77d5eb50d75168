"""Which kinds a release publishes as failing closed: those an operator's enabled, enforced
guard covers (``on_error = "deny"`` or ``guard = true``), by canonical name."""

from __future__ import annotations

from pathlib import Path

from hookbus.authoring.release import guarded_kinds
from hookbus.bus.settings.loader import Settings
from hookbus.hooks.loader import load_hooks


def _hook(root: Path, name: str, events: str, extra: str) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "HOOK.toml").write_text(
        f'name = "{name}"\nevents = [{events}]\n{extra}\n[action.prompt_inject]\ncontent = "x"\n'
    )


def test_only_operators_enforced_guards_make_a_kind_fail_closed(tmp_path: Path) -> None:
    _hook(tmp_path, "on-error", '"UserPromptSubmit"', 'on_error = "deny"')
    _hook(tmp_path, "declared", '"PreCompact"', "guard = true")
    _hook(tmp_path, "plain", '"Stop"', "")
    _hook(tmp_path, "trial", '"SessionStart"', 'on_error = "deny"\nmode = "shadow"')
    _hook(tmp_path, "agents", '"PreToolUse"', 'on_error = "deny"\nauthor = "agent:bob"')
    _hook(tmp_path, "off", '"PermissionRequest"', 'on_error = "deny"\nenabled = false')
    settings = Settings()
    report = load_hooks(tmp_path, catalogue=settings.catalogue())
    assert guarded_kinds(list(report.enabled), settings) == ["PreCompact", "PromptSubmit"]
