"""The loader: every hook it can, the rest reported (seed 000's loader scenarios)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookbus.bus.wire import Event
from hookbus.hooks.loader import Problem, load_hooks
from hookbus.hooks.registry import HookRegistry


def toml_hook(
    root: Path,
    name: str,
    *,
    extra: str = "",
    events: str = "PreToolUse",
    handler: str = "def run(event):\n    return None\n",
) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "handler.py").write_text(handler)
    (folder / "HOOK.toml").write_text(
        f'name = "{name}"\nevents = ["{events}"]\n{extra}\n'
        '[action.python]\nentrypoint = "handler:run"\n'
    )
    return folder


def test_a_hook_folder_with_one_valid_manifest_loads_one_hook(tmp_path: Path) -> None:
    toml_hook(tmp_path, "my-hook")
    report = load_hooks(tmp_path)
    assert [h.name for h in report.hooks] == ["my-hook"]
    assert report.ok
    assert report.problems == []


def test_a_malformed_hook_toml_is_skipped_without_raising(tmp_path: Path) -> None:
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "HOOK.toml").write_text("name = [this is not toml")
    report = load_hooks(tmp_path)
    assert report.hooks == []
    assert not report.ok
    [problem] = report.problems
    assert problem.path == str(tmp_path / "broken" / "HOOK.toml")
    assert "not valid TOML" in problem.reason
    assert problem.hook == "broken"


def test_all_three_forms_load_from_one_folder_and_a_broken_file_does_not_stop_the_rest(
    tmp_path: Path,
) -> None:
    toml_hook(tmp_path, "alpha")
    (tmp_path / "beta").mkdir()
    (tmp_path / "beta" / "HOOK.md").write_text(
        "---\nname: beta\nevents: [BeforeToolCall]\ncommand: sh handler.sh\ntimeout: 5\n---\n"
    )
    (tmp_path / "beta" / "handler.sh").write_text("exit 0\n")
    (tmp_path / "gamma.yaml").write_text(
        "id: gamma\nevent_type: SessionStop\nhandler:\n  kind: script\n  command: 'true'\n"
    )
    (tmp_path / "zz-broken").mkdir()
    (tmp_path / "zz-broken" / "HOOK.toml").write_text(
        'name = "zz-broken"\nevents = ["PreToolUse"]\n[action.shell]\ncommand = "x"\n'
        "timeout_secs = 0\n"
    )

    report = load_hooks(tmp_path)

    assert [(h.name, h.form) for h in report.hooks] == [
        ("alpha", "toml"),
        ("beta", "markdown"),
        ("gamma", "yaml"),
    ]
    [problem] = report.problems
    assert str(problem) == (
        f"{tmp_path}/zz-broken/HOOK.toml: action.shell.timeout_secs: must be > 0"
    )
    assert problem.field == "action.shell.timeout_secs"


def test_disabled_hooks_are_listed_but_not_in_enabled(tmp_path: Path) -> None:
    toml_hook(tmp_path, "on")
    toml_hook(tmp_path, "off", extra="enabled = false")
    report = load_hooks(tmp_path)
    assert [h.name for h in report.hooks] == ["off", "on"]
    assert [h.name for h in report.enabled] == ["on"]


def test_duplicate_names_keep_the_first_and_report_the_second(tmp_path: Path) -> None:
    toml_hook(tmp_path, "dup")
    (tmp_path / "other.yaml").write_text(
        "id: dup\nevent_type: PreToolUse\nhandler:\n  kind: script\n  command: 'true'\n"
    )
    report = load_hooks(tmp_path)
    assert [h.name for h in report.hooks] == ["dup"]
    assert report.hooks[0].form == "toml"
    [problem] = report.problems
    assert problem.field == "name" and "duplicate hook name 'dup'" in problem.reason


@pytest.mark.parametrize(
    ("requires", "reason"),
    [
        ('os = ["plan9"]', "is not one of plan9"),
        ('bins = ["no-such-binary-xyz"]', "binary 'no-such-binary-xyz' is not on PATH"),
        ('env = ["HOOKBUS_TEST_UNSET_VAR"]', "HOOKBUS_TEST_UNSET_VAR is not set"),
    ],
)
def test_hooks_whose_requirements_are_not_met_are_reported(
    tmp_path: Path, requires: str, reason: str
) -> None:
    toml_hook(tmp_path, "needy", extra=f"[requires]\n{requires}\n")
    report = load_hooks(tmp_path)
    assert report.hooks == []
    [problem] = report.problems
    assert problem.field == "requires"
    assert reason in problem.reason
    assert problem.hook == "needy"


def test_met_requirements_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKBUS_TEST_SET_VAR", "1")
    toml_hook(
        tmp_path,
        "needy",
        extra='[requires]\nos = ["linux", "darwin"]\nbins = ["sh"]\n'
        'env = ["HOOKBUS_TEST_SET_VAR"]\n',
    )
    assert [h.name for h in load_hooks(tmp_path).hooks] == ["needy"]


def test_missing_handler_files_are_reported(tmp_path: Path) -> None:
    (tmp_path / "shelly").mkdir()
    (tmp_path / "shelly" / "HOOK.toml").write_text(
        'name = "shelly"\nevents = ["PreToolUse"]\n[action.shell]\ncommand = "./nope.sh"\n'
    )
    (tmp_path / "pythony").mkdir()
    (tmp_path / "pythony" / "HOOK.toml").write_text(
        'name = "pythony"\nevents = ["PreToolUse"]\n[action.python]\n'
        'entrypoint = "no_such_module_xyz:run"\n'
    )
    report = load_hooks(tmp_path)
    assert report.hooks == []
    reasons = sorted(p.reason for p in report.problems)
    assert "does not exist" in reasons[0]
    assert "neither in" in reasons[1]


def test_a_folder_without_a_manifest_and_a_missing_hooks_dir_are_problems(tmp_path: Path) -> None:
    (tmp_path / "empty-hook").mkdir()
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / ".hidden").mkdir()
    report = load_hooks(tmp_path)
    assert [p.hook for p in report.problems] == ["empty-hook"]

    missing = load_hooks(tmp_path / "nope")
    assert not missing.ok and "does not exist" in missing.problems[0].reason


def test_a_toml_and_a_md_in_one_folder_use_the_toml_and_report_the_md(tmp_path: Path) -> None:
    folder = toml_hook(tmp_path, "both")
    (folder / "HOOK.md").write_text("---\nname: both\n---\n")
    report = load_hooks(tmp_path)
    assert [h.form for h in report.hooks] == ["toml"]
    assert "ignored" in report.problems[0].reason


def test_problem_str_is_path_field_reason() -> None:
    assert str(Problem("a/HOOK.toml", "priority", "must be an integer")) == (
        "a/HOOK.toml: priority: must be an integer"
    )
    assert str(Problem("a/HOOK.toml", None, "not valid TOML")) == "a/HOOK.toml: not valid TOML"


def test_loaded_hooks_register_in_name_order_so_ties_break_alphabetically(tmp_path: Path) -> None:
    for name in ["charlie", "alpha", "bravo"]:
        toml_hook(tmp_path, name, handler=f"def run(event):\n    return {{'context': '{name}'}}\n")
    registry = HookRegistry()
    registry.replace_dynamic(load_hooks(tmp_path).enabled, version="v1")
    decision = registry.run(Event(kind="PreToolUse"))
    assert decision.context == ["alpha", "bravo", "charlie"]


def test_two_hooks_with_a_handler_py_each_keep_their_own_module(tmp_path: Path) -> None:
    toml_hook(tmp_path, "one", handler="def run(event):\n    return {'context': 'one'}\n")
    toml_hook(tmp_path, "two", handler="def run(event):\n    return {'context': 'two'}\n")
    registry = HookRegistry()
    assert registry.replace_dynamic(load_hooks(tmp_path).hooks) == []
    assert registry.run(Event(kind="PreToolUse")).context == ["one", "two"]


def test_a_handler_can_import_its_sibling_module(tmp_path: Path) -> None:
    folder = toml_hook(
        tmp_path,
        "sib",
        handler="from sib_helpers_xyz import ANSWER\n\ndef run(event):\n"
        "    return {'context': ANSWER}\n",
    )
    (folder / "sib_helpers_xyz.py").write_text("ANSWER = 'from a sibling'\n")
    registry = HookRegistry()
    assert registry.replace_dynamic(load_hooks(tmp_path).hooks) == []
    assert registry.run(Event(kind="PreToolUse")).context == ["from a sibling"]


def test_an_edited_handler_is_imported_again_on_reload(tmp_path: Path) -> None:
    import os

    folder = toml_hook(tmp_path, "edit", handler="def run(event):\n    return {'context': 'v1'}\n")
    registry = HookRegistry()
    registry.replace_dynamic(load_hooks(tmp_path).hooks)
    assert registry.run(Event(kind="PreToolUse")).context == ["v1"]
    handler = folder / "handler.py"
    handler.write_text("def run(event):\n    return {'context': 'version two'}\n")
    stat = handler.stat()
    os.utime(handler, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    registry.replace_dynamic(load_hooks(tmp_path).hooks)
    assert registry.run(Event(kind="PreToolUse")).context == ["version two"]
