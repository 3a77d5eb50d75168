"""Issue 13 'Also': where an agent-written shell or python hook cannot be confined (no network,
writes only in its folder), it is refused at each run unless the operator sets
``security.allow_unconfined_agent_hooks``; the refusal is answered by the hook's
``on_error`` and logged. "No confinement" is simulated through
:func:`hookbus.hooks.actions.confine.agent_confinement`, which is what the refusal reads."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hookbus.bus.settings.loader import load_settings
from hookbus.bus.wire import Decision, Event
from hookbus.hooks.actions import confine
from hookbus.hooks.manifest import parse_toml
from hookbus.hooks.registry import HookRegistry

UNCONFINED = "no confinement of their own: they keep the network and may write anywhere"


@pytest.fixture
def no_agent_confinement(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(confine, "agent_confinement", lambda: UNCONFINED)


def _shell_hook(tmp_path: Path, author: str, on_error: str = "allow") -> tuple[Path, str]:
    folder = tmp_path / author.replace(":", "-")
    folder.mkdir()
    marker = folder / "ran.txt"  # written only where the folder itself is writable
    # a hook that ran denies with the reason "ran"; a refused one never starts
    (folder / "run.sh").write_text("cat >/dev/null\necho ran > ran.txt\necho ran >&2\nexit 2\n")
    text = (
        f'name = "h"\nevents = ["PreToolUse"]\nauthor = "{author}"\non_error = "{on_error}"\n'
        '[action.shell]\ncommand = "sh run.sh"\n'
    )
    return marker, text


def _run(tmp_path: Path, text: str, folder: Path, *, allow: bool = False) -> Decision:
    registry = HookRegistry(allow_unconfined_agent_hooks=allow)
    registry.register_manifest(parse_toml(text, folder / "HOOK.toml"))
    return registry.run(Event(kind="PreToolUse", payload={}, agent_id="a1"))


@pytest.mark.usefixtures("no_agent_confinement")
def test_an_unconfinable_agent_shell_hook_is_refused_and_its_on_error_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    marker, text = _shell_hook(tmp_path, "agent:a1", on_error="deny")

    with caplog.at_level(logging.WARNING, logger="hookbus.hooks.actions.shell"):
        decision = _run(tmp_path, text, marker.parent)

    assert decision.outcome == "deny"
    assert decision.trace[0].outcome == "error"
    assert "cannot be confined" in (decision.trace[0].error or "")
    assert "security.allow_unconfined_agent_hooks" in (decision.trace[0].error or "")
    assert not marker.exists()  # it never started
    assert any("refused: agent-written hook 'h'" in r.getMessage() for r in caplog.records)


@pytest.mark.usefixtures("no_agent_confinement")
def test_a_refused_agent_hook_with_on_error_allow_lets_the_request_through(
    tmp_path: Path,
) -> None:
    marker, text = _shell_hook(tmp_path, "agent:a1", on_error="allow")

    decision = _run(tmp_path, text, marker.parent)

    assert decision.outcome != "deny"
    assert decision.trace[0].outcome == "error"
    assert not marker.exists()


@pytest.mark.usefixtures("no_agent_confinement")
def test_the_operator_opt_in_runs_an_unconfinable_agent_hook(tmp_path: Path) -> None:
    marker, text = _shell_hook(tmp_path, "agent:a1")

    decision = _run(tmp_path, text, marker.parent, allow=True)

    assert (decision.outcome, decision.reason) == ("deny", "ran"), decision.trace


@pytest.mark.usefixtures("no_agent_confinement")
def test_an_operators_shell_hook_runs_whatever_the_agent_confinement(tmp_path: Path) -> None:
    marker, text = _shell_hook(tmp_path, "operator")

    decision = _run(tmp_path, text, marker.parent)

    assert (decision.outcome, decision.reason) == ("deny", "ran"), decision.trace


def test_an_agent_shell_hook_runs_where_it_is_confined_and_is_refused_where_not(
    tmp_path: Path,
) -> None:
    marker, text = _shell_hook(tmp_path, "agent:a1")

    decision = _run(tmp_path, text, marker.parent)

    if confine.agent_confinement().startswith(confine.AGENT_CONFINED):  # this project's VM
        assert (decision.outcome, decision.reason) == ("deny", "ran"), decision.trace
    else:
        assert "cannot be confined" in (decision.trace[0].error or "")
        assert not marker.exists()


def _python_hook(tmp_path: Path, author: str) -> tuple[Path, str]:
    folder = tmp_path / f"py-{author.replace(':', '-')}"
    folder.mkdir()
    marker = folder / "imported.txt"
    (folder / "handler.py").write_text(
        "from pathlib import Path\n"
        "Path(__file__).with_name('imported.txt').write_text('x')\n"
        "def handle(event):\n    return None\n"
    )
    text = (
        f'name = "p"\nevents = ["PreToolUse"]\nauthor = "{author}"\non_error = "deny"\n'
        '[action.python]\nentrypoint = "handler:handle"\n'
    )
    return marker, text


def test_an_agents_in_process_python_hook_is_refused_without_being_imported(
    tmp_path: Path,
) -> None:
    marker, text = _python_hook(tmp_path, "agent:a1")

    decision = _run(tmp_path, text, marker.parent)

    assert decision.outcome == "deny"
    assert "in-process python" in (decision.trace[0].error or "")
    assert not marker.exists()  # importing would have run the agent's code in the worker


def test_the_opt_in_and_operators_run_in_process_python_hooks(tmp_path: Path) -> None:
    agent_marker, agent_text = _python_hook(tmp_path, "agent:a1")
    op_marker, op_text = _python_hook(tmp_path, "operator")

    agent = _run(tmp_path, agent_text, agent_marker.parent, allow=True)
    operator = _run(tmp_path, op_text, op_marker.parent)

    assert agent.trace[0].outcome == "continue" and agent_marker.exists()
    assert operator.trace[0].outcome == "continue" and op_marker.exists()


def test_the_opt_in_is_a_setting_read_from_the_environment() -> None:
    default = load_settings(environ={}, warn=False)
    opted = load_settings(
        environ={"HOOKBUS_SECURITY__ALLOW_UNCONFINED_AGENT_HOOKS": "true"}, warn=False
    )

    assert HookRegistry.from_settings(default.settings).allow_unconfined_agent_hooks is False
    assert HookRegistry.from_settings(opted.settings).allow_unconfined_agent_hooks is True


def test_the_workers_confinement_line_starts_with_none_when_nothing_confines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(confine, "confinement", lambda: "none (no unshare binary): ...")
    monkeypatch.setattr(confine, "agent_confinement", lambda: UNCONFINED)

    refused = confine.describe()
    allowed = confine.describe(allow_unconfined_agent_hooks=True)

    assert refused.startswith("none") and "agent hooks refused" in refused
    assert allowed.startswith("none") and "UNCONFINED" in allowed
