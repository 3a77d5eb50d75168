"""Shell actions with real processes: exit codes, stdin, caps, timeouts, env, workdir."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hookbus.bus.wire import Decision, Event
from hookbus.errors import HookExecutionError, HookRegistrationError
from hookbus.hooks.actions.shell import ShellCall
from hookbus.hooks.manifest import HookManifest, parse_toml
from hookbus.hooks.registry import HookRegistry


def shell_hook(
    tmp_path: Path,
    script: str,
    *,
    name: str = "sh-hook",
    timeout: float = 5,
    on_error: str = "allow",
    extra: str = "",
    shell_extra: str = "",
    command: str = "./hook.sh",
) -> HookManifest:
    folder = tmp_path / name
    folder.mkdir(parents=True, exist_ok=True)
    handler = folder / "hook.sh"
    handler.write_text("#!/bin/sh\n" + script)
    handler.chmod(0o755)
    text = (
        f'name = "{name}"\nevents = ["PreToolUse"]\non_error = "{on_error}"\n{extra}\n'
        f"[action.shell]\ncommand = {json.dumps(command)}\ntimeout_secs = {timeout}\n"
        f"{shell_extra}\n"
    )
    return parse_toml(text, folder / "HOOK.toml")


def run(manifest: HookManifest, **payload: object) -> Decision:
    registry = HookRegistry()
    registry.register_manifest(manifest)
    return registry.run(Event(kind="PreToolUse", payload={"tool_name": "Bash", **payload}))


def test_exit_0_without_output_continues(tmp_path: Path) -> None:
    decision = run(shell_hook(tmp_path, "cat >/dev/null\nexit 0\n"))
    assert decision.outcome == "allow"
    assert decision.trace[0].outcome == "continue"


def test_the_event_arrives_as_json_on_stdin_and_exit_0_json_is_the_result(tmp_path: Path) -> None:
    script = (
        'tool=$(sed -n \'s/.*"tool_name":"\\([^"]*\\)".*/\\1/p\')\n'
        'printf \'{"outcome": "deny", "reason": "saw %s"}\' "$tool"\n'
    )
    decision = run(shell_hook(tmp_path, script))
    assert decision.outcome == "deny"
    assert decision.reason == "saw Bash"


def test_exit_2_denies_with_stderr_as_the_reason(tmp_path: Path) -> None:
    decision = run(shell_hook(tmp_path, "echo 'destructive command' >&2\nexit 2\n"))
    assert decision.outcome == "deny"
    assert decision.reason == "destructive command"


def test_any_other_exit_is_an_error_decided_by_on_error(tmp_path: Path) -> None:
    allow = run(shell_hook(tmp_path / "a", "echo oops >&2\nexit 3\n"))
    deny = run(shell_hook(tmp_path / "d", "echo oops >&2\nexit 3\n", on_error="deny"))
    assert allow.outcome == "allow"
    assert allow.trace[0].outcome == "error"
    assert allow.trace[0].error == "exit code 3: oops"
    assert deny.outcome == "deny"


def test_exit_codes_can_map_1_to_deny(tmp_path: Path) -> None:
    hook = shell_hook(
        tmp_path, "echo 'blocked by policy' >&2\nexit 1\n", extra='[exit_codes]\n1 = "deny"\n'
    )
    decision = run(hook)
    assert (decision.outcome, decision.reason) == ("deny", "blocked by policy")


def test_garbage_on_stdout_is_an_error_not_a_crash(tmp_path: Path) -> None:
    decision = run(shell_hook(tmp_path, "printf 'this is {not json'\n"))
    assert decision.outcome == "allow"
    assert decision.trace[0].outcome == "error"
    assert "not JSON" in decision.trace[0].error


def test_binary_garbage_and_non_object_json_are_errors(tmp_path: Path) -> None:
    binary = run(shell_hook(tmp_path / "b", "printf '\\377\\376\\000'\n"))
    listed = run(shell_hook(tmp_path / "l", "echo '[1, 2]'\n"))
    assert binary.trace[0].outcome == "error"
    assert listed.trace[0].outcome == "error"
    assert "returned list" in listed.trace[0].error


def _gone(pid: int) -> bool:
    """True when the process no longer exists or is a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


#: The pid of the shell running it, as the host numbers it: a confined hook is the first
#: process of its own PID namespace, where ``$$`` and ``$!`` count from 1 (but /proc is the
#: host's, so the parent field of a child's /proc/self/stat is the host pid).
HOST_PID = 'cut -d" " -f4 /proc/self/stat'


def test_a_hook_sleeping_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = (
        f"sh -c '{HOST_PID} > {pids}; exec sleep 30' &\nsleep 0.1\n{HOST_PID} >> {pids}\nsleep 30\n"
    )
    hook = shell_hook(tmp_path, script, timeout=0.5, on_error="deny")

    started = time.monotonic()
    decision = run(hook)
    elapsed = time.monotonic() - started

    assert decision.outcome == "deny"
    assert decision.trace[0].outcome == "timeout"
    assert elapsed < 3
    child, parent = (int(line) for line in pids.read_text().split())
    deadline = time.monotonic() + 5
    while not (_gone(child) and _gone(parent)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _gone(child), "the background child survived the timeout"
    assert _gone(parent)


def test_children_left_behind_by_a_finished_hook_are_killed(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"sh -c '{HOST_PID} > {pids}; exec sleep 30' >/dev/null 2>&1 &\nsleep 0.1\nexit 0\n"
    decision = run(shell_hook(tmp_path, script))
    assert decision.outcome == "allow"
    child = int(pids.read_text())
    deadline = time.monotonic() + 5
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _gone(child)


def test_a_hook_printing_10_mb_is_capped_and_fails(tmp_path: Path) -> None:
    hook = shell_hook(tmp_path, "head -c 10000000 /dev/zero | tr '\\0' x\n")
    call = ShellCall.from_manifest(hook, env_allowlist=("PATH",))
    code, out, _err, out_over, _ = call.execute(b"{}", 10, "PreToolUse")
    assert code == 0
    assert len(out) == 64 * 1024
    assert out_over is True

    decision = run(hook)
    assert decision.trace[0].outcome == "error"
    assert "cap" in decision.trace[0].error


def test_a_huge_stdin_event_is_delivered_even_if_the_hook_reads_slowly(tmp_path: Path) -> None:
    script = 'n=$(wc -c)\nprintf \'{"context": "%s bytes"}\' "$n"\n'
    big = "y" * 300_000
    decision = run(shell_hook(tmp_path, script), blob=big)
    [text] = decision.context
    assert int(text.split()[0]) > 300_000


def test_a_hook_that_ignores_stdin_does_not_break_the_run(tmp_path: Path) -> None:
    decision = run(shell_hook(tmp_path, "exit 0\n"), blob="z" * 500_000)
    assert decision.trace[0].outcome == "continue"


def test_the_environment_is_scrubbed_to_the_allow_list_plus_manifest_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKBUS_TEST_SECRET", "s3cret")
    script = (
        'printf \'{"context": ["secret=%s", "mine=%s", "id=%s", "path=%s"]}\' '
        '"${HOOKBUS_TEST_SECRET:-none}" "$MINE" "$HOOKBUS_HOOK_ID" "${PATH:+set}"\n'
    )
    hook = shell_hook(tmp_path, script, shell_extra='env = { MINE = "yes" }\n')
    decision = run(hook)
    assert decision.context == ["secret=none", "mine=yes", "id=sh-hook", "path=set"]


def test_the_command_runs_in_the_hook_folder(tmp_path: Path) -> None:
    script = 'printf \'{"context": "%s"}\' "$(pwd)"\n'
    hook = shell_hook(tmp_path, script)
    decision = run(hook)
    assert decision.context == [str((tmp_path / "sh-hook").resolve())]


def test_a_workdir_outside_the_hook_folder_is_refused(tmp_path: Path) -> None:
    hook = shell_hook(tmp_path, "exit 0\n", shell_extra='workdir = "../.."\n')
    with pytest.raises(HookRegistrationError, match="outside the hook folder"):
        HookRegistry().register_manifest(hook)


def test_without_shell_true_metacharacters_are_plain_arguments(tmp_path: Path) -> None:
    hook = shell_hook(
        tmp_path, 'printf \'{"context": "%s"}\' "$1"\n', command="./hook.sh '$(whoami);ls'"
    )
    decision = run(hook)
    assert decision.context == ["$(whoami);ls"]


def test_shell_true_runs_the_command_through_sh(tmp_path: Path) -> None:
    hook = shell_hook(
        tmp_path,
        "exit 0\n",
        command="cat >/dev/null; echo piped >&2; exit 2",
        shell_extra="shell = true\n",
    )
    decision = run(hook)
    assert (decision.outcome, decision.reason) == ("deny", "piped")


def test_a_missing_program_is_refused_when_the_hook_is_built(tmp_path: Path) -> None:
    hook = shell_hook(tmp_path, "exit 0\n", command="./does-not-exist.sh")
    with pytest.raises(HookRegistrationError, match=r"does-not-exist\.sh does not exist"):
        HookRegistry().register_manifest(hook)


def test_a_script_without_its_run_bit_is_refused_when_the_hook_is_built(tmp_path: Path) -> None:
    # otherwise every call fails to start and on_error answers each one as if it had run
    hook = shell_hook(tmp_path, "exit 2\n")
    (Path(hook.folder) / "hook.sh").chmod(0o644)
    with pytest.raises(HookRegistrationError, match=r"hook.sh is not executable.*chmod \+x"):
        HookRegistry().register_manifest(hook)


def test_a_program_on_no_path_directory_is_refused_when_the_hook_is_built(tmp_path: Path) -> None:
    hook = shell_hook(tmp_path, "exit 0\n", command="no-such-program-hb --check")
    with pytest.raises(HookRegistrationError, match="not on this worker's PATH"):
        HookRegistry().register_manifest(hook)


def test_a_program_that_vanishes_after_the_build_is_an_error_at_run_time(tmp_path: Path) -> None:
    hook = shell_hook(tmp_path, "exit 0\n")
    registry = HookRegistry()
    registry.register_manifest(hook)
    (Path(hook.folder) / "hook.sh").unlink()
    decision = registry.run(Event(kind="PreToolUse", payload={"tool_name": "Bash"}))
    assert decision.trace[0].outcome == "error"
    assert "cannot start" in decision.trace[0].error


def test_python_as_the_first_word_means_this_interpreter(tmp_path: Path) -> None:
    folder = tmp_path / "py"
    folder.mkdir()
    (folder / "h.py").write_text(
        "import json, sys\nevent = json.load(sys.stdin)\n"
        "print(json.dumps({'context': [sys.executable, event['kind']]}))\n"
    )
    text = 'name = "py"\nevents = ["PreToolUse"]\n[action.shell]\ncommand = "python3 h.py"\n'
    decision = run(parse_toml(text, folder / "HOOK.toml"))
    import sys

    assert decision.context == [sys.executable, "PreToolUse"]


def test_batches_arrive_as_a_json_array(tmp_path: Path) -> None:
    hook = shell_hook(tmp_path, 'c=$(head -c 1)\n[ "$c" = "[" ] || exit 3\n')
    registry = HookRegistry()
    registry.register_manifest(hook)
    events = [Event(kind="PreToolUse"), Event(kind="PreToolUse")]
    assert registry.run_hook("sh-hook", events).outcome == "continue"
    with pytest.raises(HookExecutionError, match="exit code 3"):
        registry.run_hook("sh-hook", events[0])


def _seal(folder: Path) -> None:
    """Leave ``folder`` as a worker's bundle cache holds a hook: nothing writable."""
    for path in folder.iterdir():
        path.chmod(0o555)
    folder.chmod(0o555)


def test_a_read_only_hook_folder_changed_after_the_build_is_refused_not_run(
    tmp_path: Path,
) -> None:
    manifest = shell_hook(tmp_path, "cat >/dev/null\nexit 0\n", on_error="deny")
    folder = Path(manifest.folder)
    marker = tmp_path / "ran"
    _seal(folder)
    registry = HookRegistry()
    registry.register_manifest(manifest)
    event = Event(kind="PreToolUse", payload={"tool_name": "Bash"})
    assert registry.run(event).outcome == "allow"

    # another process of the worker's user makes the cached copy writable and rewrites it
    folder.chmod(0o755)
    (folder / "hook.sh").chmod(0o755)
    (folder / "hook.sh").write_text(f"#!/bin/sh\ntouch {marker}\nexit 0\n")
    folder.chmod(0o555)
    decision = registry.run(event)

    assert decision.outcome == "deny"
    assert "changed after they were checked" in (decision.trace[0].error or "")
    assert not marker.exists()


def test_a_file_added_to_a_read_only_hook_folder_is_refused_too(tmp_path: Path) -> None:
    manifest = shell_hook(tmp_path, "cat >/dev/null\nexit 0\n", on_error="deny")
    folder = Path(manifest.folder)
    _seal(folder)
    registry = HookRegistry()
    registry.register_manifest(manifest)
    folder.chmod(0o755)
    (folder / "sitecustomize.py").write_text("import os\n")
    folder.chmod(0o555)

    decision = registry.run(Event(kind="PreToolUse", payload={"tool_name": "Bash"}))

    assert decision.outcome == "deny"


def test_a_hook_folder_being_edited_runs_what_it_holds_now(tmp_path: Path) -> None:
    manifest = shell_hook(tmp_path, "cat >/dev/null\nexit 0\n")
    registry = HookRegistry()
    registry.register_manifest(manifest)
    (Path(manifest.folder) / "hook.sh").write_text("#!/bin/sh\necho edited >&2\nexit 2\n")

    decision = registry.run(Event(kind="PreToolUse", payload={"tool_name": "Bash"}))

    assert decision.outcome == "deny" and "edited" in (decision.reason or "")
