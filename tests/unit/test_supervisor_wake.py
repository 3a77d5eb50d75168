"""The wake action: seed 003's message, delivery to one supervisor by command (placeholders
as whole arguments, message on stdin), bidirectional answers and their timeout."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hookbus.bus.wire import Event, HookResult
from hookbus.errors import HookExecutionError, HookRegistrationError
from hookbus.hooks.actions.models import WakeAction
from hookbus.hooks.actions.wake import WakeCall, available_actions, build_message
from hookbus.hooks.results import coerce_result

STUB = (
    Path(__file__).resolve().parents[2]
    / "examples"
    / "supervisor"
    / "hooks"
    / "wake-supervisor"
    / "supervisor_stub.py"
)
SECTIONS = (
    "[SESSION IDENTITY]",
    "[TRIGGER]",
    "[STATE HINT]",
    "[PANE CONTENT]",
    "[CONTEXT PRESSURE]",
    "[AVAILABLE ACTIONS]",
)


def supervision(**over: Any) -> dict[str, Any]:
    base = {
        "agent_id": "warden",
        "tmux_session_name": "warden-main",
        "openclaw_session_id": "oc-warden",
        "trigger": "response_complete",
        "state_hint": "menu",
        "pane": "Pick one\n❯ 1. Fix\n  2. Test\nEnter to select",
        "pane_lines": 120,
        "context_pressure": {"percent": 72, "level": "WARNING", "threshold": 50},
        "autocompact_pct": 50,
        "hook_mode": "async",
        "reply_wanted": False,
        "reply_deadline_ms": None,
    }
    base.update(over)
    return base


def event(kind: str = "Stop", sup: dict[str, Any] | None = None, **fields: Any) -> Event:
    payload: dict[str, Any] = {} if sup is None else {"supervision": sup}
    return Event(kind=kind, payload=payload, **fields)


class _Registry:
    env_allowlist = ("PATH", "HOME")

    def http_client(self) -> Any:  # pragma: no cover - not used by command wakes
        raise AssertionError("no http here")


def wake(tmp_path: Path, command: str | list[str] | None, **spec: Any) -> WakeCall:
    action = SimpleNamespace(
        command=command,
        url=spec.pop("url", None),
        headers=spec.pop("headers", {}),
        env=spec.pop("env", {}),
        max_output_bytes=spec.pop("max_output_bytes", 65536),
    )
    manifest = SimpleNamespace(
        name="wake-supervisor",
        folder=tmp_path,
        batch=None,
        action=SimpleNamespace(spec=WakeAction(**vars(action))),
    )
    return WakeCall.from_manifest(manifest, registry=_Registry())


def stub_command(log_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        str(STUB),
        "--session",
        "{openclaw_session_id}",
        "--log-dir",
        str(log_dir),
        *extra,
    ]


def test_the_message_has_the_six_sections_in_order_with_the_pane() -> None:
    text = build_message("Stop", supervision(), waits=False)
    positions = [text.index(section) for section in SECTIONS]
    assert positions == sorted(positions)
    assert "agent_id: warden\ntmux_session_name: warden-main" in text
    assert "[TRIGGER]\nresponse_complete" in text
    assert "[STATE HINT]\nmenu" in text
    assert "❯ 1. Fix\n  2. Test\nEnter to select" in text
    assert "[CONTEXT PRESSURE]\n72% [WARNING]" in text
    assert "hookbus tmux warden-main choose <n>" in text
    assert "decision" not in text  # an async wake asks for no answer


def test_the_actions_offered_fit_the_state() -> None:
    assert available_actions("s", "working", "response_complete") == [
        "hookbus tmux s esc",
        "hookbus tmux s snapshot",
    ]
    assert "hookbus tmux s clear_then <command>" in available_actions("s", "idle", "idle_prompt")
    assert available_actions("s", "idle", "session_terminated") == []


def test_a_wake_reaches_only_the_agents_own_supervisor_with_the_message_on_stdin(
    tmp_path: Path,
) -> None:
    call = wake(tmp_path, stub_command(tmp_path / "logs"))
    assert call(event(sup=supervision()), 10.0) is None
    logs = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert logs == ["oc-warden.log"]
    text = (tmp_path / "logs" / "oc-warden.log").read_text()
    assert all(section in text for section in SECTIONS)
    assert "Enter to select" in text


def test_placeholders_fill_whole_arguments_and_are_never_split_or_shell_run(tmp_path: Path) -> None:
    out = tmp_path / "argv.json"
    script = tmp_path / "argv.py"
    script.write_text(
        f"import json, sys\nopen({str(out)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
    )
    call = wake(tmp_path, f"python {script} 'label {{agent_id}} in {{tmux_session_name}}' $HOME")
    call(event(sup=supervision()), 10.0)
    assert json.loads(out.read_text()) == ["label warden in warden-main", "$HOME"]


@pytest.mark.parametrize(
    "bad", ["x; touch /tmp/pwned", "--exec=evil", "a b", "", "$(id)", "session-1\n"]
)
def test_an_unsafe_or_missing_supervisor_id_is_refused_and_nothing_runs(
    tmp_path: Path, bad: str
) -> None:
    call = wake(tmp_path, stub_command(tmp_path / "logs"))
    with pytest.raises(HookExecutionError, match="openclaw_session_id"):
        call(event(sup=supervision(openclaw_session_id=bad)), 10.0)
    assert not (tmp_path / "logs").exists()


def test_an_unknown_placeholder_is_refused_at_registration(tmp_path: Path) -> None:
    with pytest.raises(HookRegistrationError, match=r"unknown placeholder \{session\}"):
        wake(tmp_path, "notify --to {session}")


def test_an_event_of_an_unmanaged_session_wakes_nobody(tmp_path: Path) -> None:
    call = wake(tmp_path, stub_command(tmp_path / "logs"))
    assert call(event(sup=None), 10.0) is None
    assert not (tmp_path / "logs").exists()


def test_a_bidirectional_answer_becomes_a_block_with_the_supervisors_reason(
    tmp_path: Path,
) -> None:
    call = wake(tmp_path, stub_command(tmp_path / "logs", "--answer", "Write SUMMARY.md first"))
    raw = call(event(sup=supervision(hook_mode="bidirectional", reply_wanted=True)), 10.0, True)
    result = coerce_result(raw, "wake-supervisor")
    assert (result.outcome, result.reason) == ("deny", "Write SUMMARY.md first")
    text = (tmp_path / "logs" / "oc-warden.log").read_text()
    assert '{"decision": "block", "reason": "<next instruction>"}' in text


def test_a_silent_supervisor_lets_the_session_stop_and_says_so(tmp_path: Path) -> None:
    call = wake(tmp_path, stub_command(tmp_path / "logs", "--delay", "30", "--answer", "late"))
    raw = call(event(sup=supervision(hook_mode="bidirectional")), 1.0, True)
    assert isinstance(raw, HookResult)
    assert raw.outcome == "continue"
    assert "did not answer within" in raw.context[0]
    assert "the session stops" in raw.context[0]


def test_an_async_wake_drops_the_answer_but_reports_a_failed_delivery(tmp_path: Path) -> None:
    talk = wake(tmp_path, [sys.executable, "-c", "print('not json, and fine')"])
    assert talk(event(sup=supervision()), 10.0) is None
    broken = wake(tmp_path, [sys.executable, "-c", "import sys; sys.exit('no such session')"])
    with pytest.raises(HookExecutionError, match="exited 1: no such session"):
        broken(event(sup=supervision()), 10.0)


def test_the_example_wake_hook_loads_and_registers() -> None:
    from hookbus.hooks.manifest import load_manifest
    from hookbus.hooks.registry import HookRegistry

    manifest = load_manifest(STUB.parent / "HOOK.toml")
    assert manifest.action.kind == "wake"
    assert manifest.timeout_s == 600
    registry = HookRegistry()
    assert registry.replace_dynamic([manifest]) == []
    hook = registry.get("wake-supervisor")
    assert hook is not None
    assert hook.handler.startswith("wake: ")
    assert "{openclaw_session_id}" in hook.handler
    # only events of managed sessions match: no job for the others
    managed = event(sup=supervision())
    assert [h.id for h in registry.matching(managed)] == ["wake-supervisor"]
    assert registry.matching(event(sup=None)) == []


@pytest.mark.parametrize(
    ("action", "field"),
    [
        ('mode = "bidirectional"', "action.wake.mode"),
        ('command = "x"\nurl = "http://a"', "action.wake"),
        ('command = ""', "action.wake"),
        ('url = "ftp://a"', "action.wake"),
        ('command = "x"\ntimeout_secs = 601', "action.wake.timeout_secs"),
    ],
)
def test_a_wake_manifest_is_strict(tmp_path: Path, action: str, field: str) -> None:
    from hookbus.errors import ManifestError
    from hookbus.hooks.manifest import parse_toml

    text = f'name = "w"\nevents = ["Stop"]\n[action.wake]\n{action}\n'
    with pytest.raises(ManifestError) as info:
        parse_toml(text, tmp_path / "HOOK.toml")
    assert info.value.field == field


def test_a_wake_manifest_with_an_unknown_placeholder_does_not_register(tmp_path: Path) -> None:
    from hookbus.hooks.manifest import parse_toml
    from hookbus.hooks.registry import HookRegistry

    text = 'name = "w"\nevents = ["Stop"]\n[action.wake]\ncommand = "notify {session_id}"\n'
    errors = HookRegistry().replace_dynamic([parse_toml(text, tmp_path / "HOOK.toml")])
    assert "unknown placeholder {session_id}" in str(errors[0])


def test_hooks_info_describes_what_a_wake_hook_runs() -> None:
    from hookbus.hooks.describe import handler_path
    from hookbus.hooks.manifest import load_manifest

    manifest = load_manifest(STUB.parent / "HOOK.toml")
    described = handler_path(manifest, ())
    assert described.startswith("wake: python supervisor_stub.py --session {openclaw_session_id}")


class _Answering:
    """A local HTTP supervisor: records each POST and answers with ``answer``."""

    def __init__(self, answer: bytes) -> None:
        import http.server
        import threading

        self.bodies: list[dict[str, Any]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["content-length"])
                outer.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/wake"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _HttpRegistry(_Registry):
    def __init__(self) -> None:
        import httpx

        self.client = httpx.Client()

    def http_client(self) -> Any:
        return self.client


def test_a_url_wake_posts_the_message_and_its_answer_blocks_a_bidirectional_stop(
    tmp_path: Path,
) -> None:
    answer = json.dumps({"decision": "block", "reason": "carry on"}).encode()
    supervisor = _Answering(answer)
    registry = _HttpRegistry()
    try:
        action = SimpleNamespace(
            command=None, url=supervisor.url, headers={}, env={}, max_output_bytes=65536
        )
        manifest = SimpleNamespace(
            name="wake-http",
            folder=tmp_path,
            batch=None,
            action=SimpleNamespace(spec=WakeAction(**vars(action))),
        )
        call = WakeCall.from_manifest(manifest, registry=registry)
        assert call(event(sup=supervision()), 10.0) is None  # async: the answer is dropped
        raw = call(event(sup=supervision(hook_mode="bidirectional")), 10.0, True)
        result = coerce_result(raw, "wake-http")
        assert (result.outcome, result.reason) == ("deny", "carry on")
    finally:
        registry.client.close()
        supervisor.close()
    body = supervisor.bodies[0]
    assert (body["agent_id"], body["openclaw_session_id"], body["tmux_session_name"]) == (
        "warden",
        "oc-warden",
        "warden-main",
    )
    assert body["trigger"] == "response_complete"
    assert all(section in body["message"] for section in SECTIONS)
