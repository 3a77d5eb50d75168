"""The sandbox agent-written hooks run in: an environment built from scratch (manifest env
names checked against the allowlist, loader and interpreter variables refused), resource
limits, and a refusal that says why where the sandbox cannot be built. Real sandboxed runs
where bubblewrap is available (this project's machines install it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hookbus.bus.wire import Decision, Event
from hookbus.errors import HookRegistrationError
from hookbus.hooks.actions import confine, sandbox
from hookbus.hooks.actions.sandbox import Limits, env_refusal
from hookbus.hooks.actions.scope import AgentPolicy
from hookbus.hooks.manifest import parse_toml
from hookbus.hooks.registry import HookRegistry


def _run(tmp_path: Path, script: str, env: str = "", policy: AgentPolicy | None = None) -> Decision:
    folder = tmp_path / "h"
    folder.mkdir(exist_ok=True)
    (folder / "run.sh").write_text(script)
    text = (
        'name = "h"\nevents = ["PreToolUse"]\nauthor = "agent:a1"\n'
        f'[action.shell]\ncommand = "sh run.sh"\n{env}'
    )
    registry = HookRegistry(agent_policy=policy)
    registry.register_manifest(parse_toml(text, folder / "HOOK.toml"))
    return registry.run(Event(kind="PreToolUse", payload={}, agent_id="a1"))


def _refused(decision: Decision) -> bool:
    """Where no sandbox can be built, the hook is refused instead (and that is checked)."""
    if confine.sandbox_ready():
        return False
    assert "cannot be confined" in (decision.trace[0].error or ""), decision.trace
    return True


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("HOOK_MODE", True),
        ("LANG", True),
        ("TZ", True),
        ("CUSTOM_FLAG", False),
        ("LD_PRELOAD", False),
        ("LD_LIBRARY_PATH", False),
        ("PYTHONSTARTUP", False),
        ("PYTHONPATH", False),
        ("BASH_ENV", False),
        ("ENV", False),
        ("PROMPT_COMMAND", False),
        ("PATH", False),
        ("HOOKBUS_HOOK_DIR", False),
        ("lower", False),
        ("HOOK_X\n", False),
    ],
)
def test_agent_env_names_are_checked_against_the_allowlist(name: str, allowed: bool) -> None:
    assert (env_refusal(name) is None) is allowed
    # the operator's allowlist adds names, never a loader or interpreter variable
    assert env_refusal(name, ("CUSTOM_FLAG", "LD_PRELOAD")) is None or name != "CUSTOM_FLAG"
    assert env_refusal("LD_PRELOAD", ("LD_PRELOAD",)) is not None


def test_a_hook_setting_a_loader_variable_is_not_built(tmp_path: Path) -> None:
    with pytest.raises(HookRegistrationError, match="LD_PRELOAD"):
        _run(tmp_path, "true\n", env='[action.shell.env]\nLD_PRELOAD = "/tmp/x.so"\n')


def test_the_sandbox_environment_is_built_from_scratch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKBUS_REDIS_URL", "redis://:worker-secret@127.0.0.1:6379/0")
    monkeypatch.setenv("LANG", "worker-lang")

    decision = _run(
        tmp_path,
        "cat >/dev/null\nenv | sort >&2\nexit 2\n",
        env='[action.shell.env]\nHOOK_MODE = "strict"\n',
    )

    if _refused(decision):
        return
    names = {line.split("=", 1)[0] for line in (decision.reason or "").splitlines()}
    assert "worker-secret" not in (decision.reason or "")
    assert "worker-lang" not in (decision.reason or "")
    assert "HOOK_MODE=strict" in (decision.reason or "")
    assert "HOOKBUS_HOOK_DIR=/hook" in (decision.reason or "")
    assert names <= {
        "PATH",
        "HOME",
        "LANG",
        "TMPDIR",
        "HOOK_MODE",
        "HOOKBUS_HOOK_ID",
        "HOOKBUS_HOOK_DIR",
        "HOOKBUS_EVENT_KIND",
        "PWD",
        "SHLVL",
        "_",
        "OLDPWD",
    }, names


@pytest.fixture
def small_limits() -> Iterator[Limits]:
    limits = Limits(cpu_s=3, processes=32, file_bytes=2 * 1024 * 1024)
    confine.configure_limits(limits)
    yield limits
    confine.configure_limits(Limits())


def test_the_sandbox_limits_apply_to_the_hook(tmp_path: Path, small_limits: Limits) -> None:
    decision = _run(
        tmp_path,
        "cat >/dev/null\n"
        "grep -e '^Max cpu time' -e '^Max processes' -e '^Max file size' /proc/self/limits"
        " | awk '{print $(NF-2)}' | tr '\\n' ' ' >&2\necho >&2\n"
        "head -c 3000000 /dev/zero > big 2>/dev/null\nwc -c < big >&2\nexit 2\n",
    )

    if _refused(decision):
        return
    limits_line, size = (decision.reason or "").split("\n")[-2:]
    # /proc/self/limits: cpu time (s), file size (bytes), processes: the soft limits
    assert limits_line.split() == ["3", str(2 * 1024 * 1024), "32"], limits_line
    assert int(size) == 2 * 1024 * 1024  # the write stopped at the file-size limit


@pytest.fixture
def no_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As on a host without bubblewrap: the probe finds no tools (caches reset around)."""
    monkeypatch.setattr(sandbox, "find_tools", lambda: None)
    sandbox._probed.clear()
    monkeypatch.setattr(confine, "_agent_mode", "unprobed")
    yield
    sandbox._probed.clear()


@pytest.mark.usefixtures("no_bubblewrap")
def test_without_bubblewrap_agent_hooks_are_refused_and_the_worker_says_why(
    tmp_path: Path,
) -> None:
    line = confine.describe()
    decision = _run(tmp_path, "cat >/dev/null\necho ran >&2\nexit 2\n")

    assert "agent hooks refused" in line and "bubblewrap" in line, line
    assert decision.trace[0].outcome == "error"
    assert "cannot be confined" in (decision.trace[0].error or "")
    assert "install Debian's bubblewrap" in (decision.trace[0].error or "")
