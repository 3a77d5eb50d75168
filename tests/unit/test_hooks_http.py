"""HTTP actions against a tiny local server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from hookbus.bus.wire import Decision, Event
from hookbus.errors import HookRegistrationError
from hookbus.hooks.manifest import HookManifest, parse_toml
from hookbus.hooks.registry import HookRegistry

release = threading.Event()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if self.path == "/deny":
            self._send(200, {"outcome": "deny", "reason": "remote says no"})
        elif self.path == "/claude":
            self._send(200, {"hookSpecificOutput": {"permissionDecision": "ask"}})
        elif self.path == "/empty":
            self.send_response(204)
            self.end_headers()
        elif self.path == "/error":
            self._send(500, {"oops": True})
        elif self.path == "/garbage":
            self._send_raw(200, b"<html>not json</html>")
        elif self.path == "/flood":  # an endpoint that answers far more than any hook needs
            self.send_response(200)
            self.end_headers()
            chunk = b" " * 65536
            try:
                for _ in range(160):  # 10 MiB, no content-length
                    self.wfile.write(chunk)
            except OSError:
                pass  # the hook stopped reading: what it should do
        elif self.path == "/slow":
            release.wait(5)
            self._send(200, {})
        elif self.path == "/echo":
            event = json.loads(body)
            self._send(
                200,
                {
                    "context": [
                        event["kind"],
                        self.headers.get("x-token", "none"),
                        self.headers.get("content-type", ""),
                    ]
                },
            )
        else:
            self._send(404, {})

    def _send(self, status: int, data: object) -> None:
        self._send_raw(status, json.dumps(data).encode())

    def _send_raw(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    release.set()
    httpd.shutdown()
    httpd.server_close()


def http_hook(
    tmp_path: Path, url: str, *, extra: str = "", http_extra: str = "", timeout: float = 5
) -> HookManifest:
    folder = tmp_path / "web"
    folder.mkdir(exist_ok=True)
    text = (
        f'name = "web"\nevents = ["PreToolUse"]\n{extra}\n'
        f'[action.http]\nurl = "{url}"\ntimeout_secs = {timeout}\n{http_extra}\n'
    )
    return parse_toml(text, folder / "HOOK.toml")


def run(manifest: HookManifest) -> Decision:
    registry = HookRegistry()
    registry.register_manifest(manifest)
    try:
        return registry.run(Event(kind="PreToolUse", payload={"tool_name": "Bash"}))
    finally:
        registry.close()


def test_a_2xx_json_body_is_the_result(server: str, tmp_path: Path) -> None:
    decision = run(http_hook(tmp_path, f"{server}/deny"))
    assert (decision.outcome, decision.reason) == ("deny", "remote says no")


def test_claude_code_answers_are_accepted_over_http(server: str, tmp_path: Path) -> None:
    assert run(http_hook(tmp_path, f"{server}/claude")).outcome == "ask"


def test_an_empty_2xx_body_continues(server: str, tmp_path: Path) -> None:
    decision = run(http_hook(tmp_path, f"{server}/empty"))
    assert decision.trace[0].outcome == "continue"


@pytest.mark.parametrize(
    ("path", "text"), [("/error", "HTTP 500"), ("/garbage", "not JSON"), ("/missing", "HTTP 404")]
)
def test_anything_else_is_an_error_decided_by_on_error(
    server: str, tmp_path: Path, path: str, text: str
) -> None:
    decision = run(http_hook(tmp_path, f"{server}{path}", extra='on_error = "deny"'))
    assert decision.outcome == "deny"
    assert decision.trace[0].outcome == "error"
    assert text in (decision.trace[0].error or "")


def test_a_body_past_the_cap_is_an_error_and_is_not_read_in_full(
    server: str, tmp_path: Path
) -> None:
    decision = run(
        http_hook(
            tmp_path,
            f"{server}/flood",
            extra='on_error = "deny"',
            http_extra="max_response_bytes = 100000",
        )
    )
    assert decision.outcome == "deny"
    assert decision.trace[0].outcome == "error"
    assert "more than 100000 bytes" in (decision.trace[0].error or "")


def test_a_connection_refused_is_an_error(tmp_path: Path) -> None:
    decision = run(http_hook(tmp_path, "http://127.0.0.1:9/nothing"))
    assert decision.trace[0].outcome == "error"


def test_a_slow_server_times_out(server: str, tmp_path: Path) -> None:
    started = time.monotonic()
    decision = run(http_hook(tmp_path, f"{server}/slow", timeout=0.3, extra='on_error = "deny"'))
    assert decision.outcome == "deny"
    assert decision.trace[0].outcome == "timeout"
    assert time.monotonic() - started < 3


def test_the_event_is_posted_as_json_with_headers_from_allowed_env(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_TOKEN_FOR_TEST", "t0k3n")
    hook = http_hook(
        tmp_path,
        f"{server}/echo",
        extra='[requires]\nenv = ["HOOK_TOKEN_FOR_TEST"]',
        http_extra='headers = { x-token = "Bearer ${HOOK_TOKEN_FOR_TEST}" }',
    )
    decision = run(hook)
    assert decision.context == ["PreToolUse", "Bearer t0k3n", "application/json"]


def test_headers_may_not_reference_env_vars_outside_the_allow_list(
    server: str, tmp_path: Path
) -> None:
    hook = http_hook(
        tmp_path, f"{server}/echo", http_extra='headers = { x-token = "${AWS_SECRET_ACCESS_KEY}" }'
    )
    with pytest.raises(HookRegistrationError, match="AWS_SECRET_ACCESS_KEY"):
        HookRegistry().register_manifest(hook)
