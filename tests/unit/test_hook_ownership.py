"""Issue 13 row 1: every hook has an author; an agent never replaces, disables,
re-prioritises or shadows a hook it did not write; under ``supervised`` what an agent writes
waits in ``.pending/`` until ``hookbus hooks approve`` (or ``reject``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
import typer
from typer.testing import CliRunner

from hookbus.audit.autonomy import AutonomyPolicy
from hookbus.authoring.pending import (
    approve_pending,
    folder_digest,
    list_pending,
    reject_pending,
)
from hookbus.authoring.write import write_hook
from hookbus.bundles import history
from hookbus.cli.hooks import authoring as hooks_authoring
from hookbus.errors import HookExists, HookNotFound, ManifestError
from hookbus.hooks.loader import load_hooks
from hookbus.hooks.manifest import parse_toml

SUPERVISED = AutonomyPolicy()
FULL = AutonomyPolicy(level="full")

GUARD_TOML = """name = "block-destructive"
events = ["PreToolUse"]
priority = 10
[action.shell]
command = "sh guard.sh"
"""


def operator_guard(hooks: Path, folder: str = "block-destructive") -> Path:
    path = hooks / folder
    path.mkdir(parents=True)
    (path / "HOOK.toml").write_text(GUARD_TOML)
    (path / "guard.sh").write_text("#!/bin/sh\ncat >/dev/null\nexit 0\n")
    return path


def spec(name: str = "block-destructive", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "events": ["PreToolUse"],
        "action": {"script": "#!/bin/sh\ncat >/dev/null\nexit 0\n", "language": "sh"},
        **extra,
    }


def test_a_hand_written_manifest_is_the_operators_and_a_written_hook_names_its_agent(
    tmp_path: Path,
) -> None:
    hooks = tmp_path / "hooks"
    operator_guard(hooks)
    assert load_hooks(hooks).hooks[0].author == "operator"
    result = write_hook(spec("lint"), hooks_dir=hooks, policy=FULL, author="agent:claude-7")
    assert result.ok, result.reason
    lint = next(h for h in load_hooks(hooks).hooks if h.name == "lint")
    assert lint.author == "agent:claude-7" and lint.agent_authored


def test_an_author_that_is_neither_operator_nor_agent_is_refused() -> None:
    text = GUARD_TOML.replace("priority = 10", 'priority = 10\nauthor = "mallory"')
    with pytest.raises(ManifestError, match="author"):
        parse_toml(text, Path("x/HOOK.toml"))


@pytest.mark.parametrize(
    "change",
    [{}, {"enabled": False}, {"priority": 1_000_000}, {"priority": -5}],
    ids=["replace", "disable", "re-prioritise later", "re-prioritise earlier"],
)
@pytest.mark.parametrize("policy", [SUPERVISED, FULL], ids=["supervised", "full"])
def test_an_agent_never_replaces_disables_or_reprioritises_an_operators_hook(
    tmp_path: Path, change: dict[str, Any], policy: AutonomyPolicy
) -> None:
    hooks = tmp_path / "hooks"
    guard = operator_guard(hooks)
    before = (guard / "HOOK.toml").read_text()
    result = write_hook(
        spec(**change), hooks_dir=hooks, policy=policy, replace=True, author="agent:a1"
    )
    assert not result.ok and result.code == "ownership", result.reason
    assert "operator" in result.reason
    assert (guard / "HOOK.toml").read_text() == before
    assert list_pending(hooks) == []


def test_an_agent_never_shadows_a_hook_by_taking_its_name_in_another_folder(
    tmp_path: Path,
) -> None:
    hooks = tmp_path / "hooks"
    operator_guard(hooks, folder="zz-guard")  # the folder sorts after the agent's would
    result = write_hook(spec(), hooks_dir=hooks, policy=FULL, author="agent:a1")
    assert not result.ok and result.code == "ownership"
    assert [h.name for h in load_hooks(hooks).hooks] == ["block-destructive"]
    assert load_hooks(hooks).hooks[0].folder.name == "zz-guard"


def test_an_agent_never_replaces_another_agents_hook_but_may_replace_its_own(
    tmp_path: Path,
) -> None:
    hooks = tmp_path / "hooks"
    assert write_hook(spec("lint"), hooks_dir=hooks, policy=FULL, author="agent:a1").ok
    other = write_hook(spec("lint"), hooks_dir=hooks, policy=FULL, replace=True, author="agent:b2")
    assert not other.ok and other.code == "ownership" and "agent:a1" in other.reason
    own = write_hook(
        spec("lint", priority=7), hooks_dir=hooks, policy=FULL, replace=True, author="agent:a1"
    )
    assert own.ok and own.replaced


def test_under_supervised_an_agent_hook_is_pending_and_the_loader_leaves_it_out(
    tmp_path: Path,
) -> None:
    hooks = tmp_path / "hooks"
    operator_guard(hooks)
    result = write_hook(spec("lint"), hooks_dir=hooks, policy=SUPERVISED, author="agent:a1")
    assert result.ok and result.pending, result.reason
    assert result.path == str(hooks / ".pending" / "lint")
    assert "hooks approve lint" in result.to_dict()["next_step"]
    assert [h.name for h in load_hooks(hooks).hooks] == ["block-destructive"]
    [waiting] = list_pending(hooks)
    assert (waiting.name, waiting.author, len(waiting.sha256)) == ("lint", "agent:a1", 64)


def test_a_pending_hook_from_one_agent_cannot_be_overwritten_by_another(tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    assert write_hook(spec("lint"), hooks_dir=hooks, policy=SUPERVISED, author="agent:a1").ok
    again = write_hook(
        spec("lint"), hooks_dir=hooks, policy=SUPERVISED, replace=True, author="agent:b2"
    )
    assert not again.ok and again.code == "ownership"
    assert list_pending(hooks)[0].author == "agent:a1"


def test_approve_moves_the_pending_hook_in_and_reject_deletes_it(tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    assert write_hook(spec("lint"), hooks_dir=hooks, policy=SUPERVISED, author="agent:a1").ok
    assert write_hook(spec("typo"), hooks_dir=hooks, policy=SUPERVISED, author="agent:a1").ok
    approved = approve_pending(hooks, "lint")
    assert approved.author == "agent:a1"
    assert [h.name for h in load_hooks(hooks).hooks] == ["lint"]
    reject_pending(hooks, "typo")
    assert list_pending(hooks) == []
    assert not (hooks / "typo").exists()
    with pytest.raises(HookNotFound):
        approve_pending(hooks, "typo")


def test_a_new_version_of_an_approved_hook_waits_while_the_old_one_keeps_running(
    tmp_path: Path,
) -> None:
    hooks = tmp_path / "hooks"
    assert write_hook(spec("lint"), hooks_dir=hooks, policy=FULL, author="agent:a1").ok
    update = write_hook(
        spec("lint", priority=3),
        hooks_dir=hooks,
        policy=SUPERVISED,
        replace=True,
        author="agent:a1",
    )
    assert update.ok and update.pending
    assert load_hooks(hooks).hooks[0].priority == 100
    approve_pending(hooks, "lint")
    assert load_hooks(hooks).hooks[0].priority == 3


def test_approve_refuses_to_replace_a_hook_another_author_wrote_meanwhile(
    tmp_path: Path,
) -> None:
    hooks = tmp_path / "hooks"
    assert write_hook(spec("lint"), hooks_dir=hooks, policy=SUPERVISED, author="agent:a1").ok
    operator_guard(hooks, folder="lint")
    with pytest.raises(HookExists):
        approve_pending(hooks, "lint")
    assert (hooks / "lint" / "guard.sh").is_file()


def _read(hooks: Path, name: str) -> str:
    """The digest of a pending copy, as the operator read it in `hooks pending`."""
    return folder_digest(hooks / ".pending" / name)


def _cli(*args: str) -> Any:
    app = typer.Typer()
    for name in ("write", "approve", "reject", "pending"):
        app.command(name)(getattr(hooks_authoring, name))
    env = {"HOOKBUS_CONFIG": None, "HOOKBUS_HOOKS_DIR": None, "HOOKBUS_AGENT_ID": None}
    return CliRunner().invoke(app, list(args), env=env)


def test_hooks_approve_and_reject_on_the_command_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    real_redis: redis.Redis,
    real_redis_url: str,
    namespace: str,
) -> None:
    # each change is recorded in the fleet's history: this test's namespace, not the default
    monkeypatch.setenv("HOOKBUS_REDIS_URL", real_redis_url)
    monkeypatch.setenv("HOOKBUS_NAMESPACE", namespace)
    hooks = tmp_path / "hooks"
    for name in ("lint", "typo"):
        spec_file = tmp_path / f"{name}.json"
        spec_file.write_text(json.dumps(spec(name)))
        out = _cli("write", "--spec", str(spec_file), "--dir", str(hooks), "--author", "a1")
        assert out.exit_code == 0, out.output
    listed = _cli("pending", "--dir", str(hooks), "--json")
    assert [h["name"] for h in json.loads(listed.stdout)["pending"]] == ["lint", "typo"]
    assert json.loads(listed.stdout)["pending"][0]["author"] == "agent:a1"
    out = _cli("approve", "lint", "--dir", str(hooks), "--digest", _read(hooks, "lint"))
    assert out.exit_code == 0 and "approved lint" in out.stdout, out.output
    out = _cli("reject", "typo", "--dir", str(hooks), "--json")
    assert out.exit_code == 0 and json.loads(out.stdout)["rejected"] is True
    assert [h.name for h in load_hooks(hooks).hooks] == ["lint"]
    missing = _cli("approve", "typo", "--dir", str(hooks))
    assert missing.exit_code == 1 and "no hook named 'typo'" in missing.output
    changes = [(e.action, e.hook) for e in history.read(real_redis, namespace)]
    assert changes == [
        ("write", "lint"),
        ("write", "typo"),
        ("approve", "lint"),
        ("reject", "typo"),
    ]


def test_an_approval_may_widen_an_agent_hooks_scope_and_says_so(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    real_redis: redis.Redis,
    real_redis_url: str,
    namespace: str,
) -> None:
    monkeypatch.setenv("HOOKBUS_REDIS_URL", real_redis_url)
    monkeypatch.setenv("HOOKBUS_NAMESPACE", namespace)
    hooks = tmp_path / "hooks"
    for name in ("narrow", "wide"):
        spec_file = tmp_path / f"{name}.json"
        spec_file.write_text(json.dumps(spec(name)))
        out = _cli("write", "--spec", str(spec_file), "--dir", str(hooks), "--author", "a1")
        assert out.exit_code == 0, out.output

    narrow = _cli("approve", "narrow", "--dir", str(hooks), "--digest", _read(hooks, "narrow"))
    wide = _cli(
        *("approve", "wide", "--dir", str(hooks), "--scope", "a2", "--json"),
        *("--digest", _read(hooks, "wide")),
    )

    assert "acts on its author a1's events only" in " ".join(narrow.stdout.split()), narrow.output
    assert json.loads(wide.stdout)["scope"] == ["a2"], wide.output
    assert "a1, a2" in json.loads(wide.stdout)["acts_on"]
    loaded = {h.name: h.scope for h in load_hooks(hooks).hooks}
    assert loaded == {"narrow": [], "wide": ["a2"]}
    approvals = [e for e in history.read(real_redis, namespace) if e.action == "approve"]
    assert [(e.hook, e.extra) for e in approvals] == [("narrow", {}), ("wide", {"scope": ["a2"]})]


def test_pending_shows_each_hooks_findings_and_whose_events_it_would_act_on(
    tmp_path: Path,
) -> None:
    hooks = tmp_path / "hooks"
    script = {"script": "cat >/dev/null\necho a && echo b\n", "language": "sh"}
    chained = spec("chained", action=script)  # a medium finding: written, pending
    assert write_hook(chained, hooks_dir=hooks, policy=SUPERVISED, author="agent:a1").pending

    out = _cli("pending", "--dir", str(hooks), "--json")
    text = _cli("pending", "--dir", str(hooks))

    [entry] = json.loads(out.stdout)["pending"]
    assert entry["acts_on"] == "its author a1's events only"
    assert "shell-chaining" in {f["rule"] for f in entry["findings"]}
    assert "shell-chaining" in text.stdout and "a1's events only" in " ".join(text.stdout.split())


def test_an_agents_write_cannot_carry_a_scope(tmp_path: Path) -> None:
    result = write_hook(
        spec("sneaky", scope=["*"]), hooks_dir=tmp_path, policy=FULL, author="agent:a1"
    )

    assert not result.ok


def test_hooks_list_names_each_pending_hook_and_leaves_it_out_of_the_table(tmp_path: Path) -> None:
    from hookbus.cli.hooks.manage import app as hooks_app

    hooks = tmp_path / "hooks"
    operator_guard(hooks)
    assert write_hook(spec("lint"), hooks_dir=hooks, policy=SUPERVISED, author="agent:a1").ok
    env = {"HOOKBUS_CONFIG": None, "HOOKBUS_HOOKS_DIR": None}
    out = CliRunner().invoke(hooks_app, ["list", "--dir", str(hooks), "--json"], env=env)
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert [h["name"] for h in data["hooks"]] == ["block-destructive"]
    assert data["pending"] == [{"name": "lint", "author": "agent:a1"}]
    text = CliRunner().invoke(hooks_app, ["list", "--dir", str(hooks)], env=env)
    assert "pending lint (by agent:a1)" in text.stdout


def test_an_agent_session_cannot_disable_or_enable_a_hook_it_did_not_write(
    tmp_path: Path,
) -> None:
    from hookbus.cli.hooks.manage import app as hooks_app

    hooks = tmp_path / "hooks"
    guard = operator_guard(hooks)
    assert write_hook(spec("lint"), hooks_dir=hooks, policy=FULL, author="agent:a1").ok
    base = {"HOOKBUS_CONFIG": None, "HOOKBUS_HOOKS_DIR": None}
    as_agent = {**base, "HOOKBUS_AGENT_ID": "a1"}
    before = (guard / "HOOK.toml").read_text()
    out = CliRunner().invoke(
        hooks_app, ["disable", "block-destructive", "--dir", str(hooks)], env=as_agent
    )
    assert out.exit_code == 1 and "written by operator" in out.output, out.output
    assert (guard / "HOOK.toml").read_text() == before
    own = CliRunner().invoke(hooks_app, ["disable", "lint", "--dir", str(hooks)], env=as_agent)
    assert own.exit_code == 0, own.output
    operator = CliRunner().invoke(
        hooks_app, ["disable", "block-destructive", "--dir", str(hooks)], env=base
    )
    assert operator.exit_code == 0, operator.output
    assert not load_hooks(hooks).get("block-destructive").enabled  # type: ignore[union-attr]
