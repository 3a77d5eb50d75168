"""Issue 13 row 8: an agent-written http hook reaches only public addresses, judged on the
address it actually dials (numeric and IPv4-mapped spellings, names that resolve inside),
redirects are not followed, the operator may allowlist hosts, and headers carry only the
variables the operator declared."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from hookbus.bus.wire import Decision, Event
from hookbus.errors import HookRegistrationError
from hookbus.hooks.actions import egress_client
from hookbus.hooks.actions.egress import EgressPolicy, destination_problem
from hookbus.hooks.manifest import HookManifest, parse_toml
from hookbus.hooks.registry import HookRegistry

HITS: list[str] = []


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return

    def do_POST(self) -> None:
        HITS.append(self.path)
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("location", "/target")
            self.send_header("content-length", "0")
            self.end_headers()
            return
        body = json.dumps({"context": self.headers.get("x-token", "none")}).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield int(httpd.server_address[1])
    httpd.shutdown()
    httpd.server_close()


def hook(tmp_path: Path, url: str, *, author: str = "agent:a1", headers: str = "") -> HookManifest:
    folder = tmp_path / "web"
    folder.mkdir(exist_ok=True)
    text = (
        f'name = "web"\nevents = ["PreToolUse"]\nauthor = "{author}"\n'
        f'[action.http]\nurl = "{url}"\ntimeout_secs = 5\n{headers}\n'
    )
    return parse_toml(text, folder / "HOOK.toml")


def run(manifest: HookManifest, egress: EgressPolicy | None = None) -> Decision:
    registry = HookRegistry(egress=egress)
    registry.register_manifest(manifest)
    try:
        return registry.run(Event(kind="PreToolUse", payload={"tool_name": "Bash"}, agent_id="a1"))
    finally:
        registry.close()


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "2130706433", "0x7f000001", "127.1", "localhost", "[::ffff:127.0.0.1]"],
)
def test_an_agent_hook_never_reaches_loopback_however_it_is_spelt(
    tmp_path: Path, port: int, host: str
) -> None:
    HITS.clear()
    decision = run(hook(tmp_path, f"http://{host}:{port}/hook"))
    [trace] = decision.trace
    assert trace.outcome == "error" and "refused:" in (trace.error or ""), trace
    assert HITS == []


def test_an_operator_hook_still_reaches_a_local_service(tmp_path: Path, port: int) -> None:
    HITS.clear()
    decision = run(hook(tmp_path, f"http://127.0.0.1:{port}/hook", author="operator"))
    assert decision.trace[0].outcome == "continue", decision.trace
    assert HITS == ["/hook"]


def test_an_allowlisted_host_may_be_private_and_redirects_are_not_followed(
    tmp_path: Path, port: int
) -> None:
    HITS.clear()
    allow = EgressPolicy(allow_hosts=("127.0.0.1",))
    assert run(hook(tmp_path, f"http://127.0.0.1:{port}/hook"), allow).trace[0].outcome == (
        "continue"
    )
    redirected = run(hook(tmp_path, f"http://127.0.0.1:{port}/redirect"), allow)
    assert redirected.trace[0].outcome == "error" and "302" in (redirected.trace[0].error or "")
    assert HITS == ["/hook", "/redirect"]


def test_a_name_that_resolves_to_a_private_address_is_refused_when_dialled(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = socket.getaddrinfo

    def fake(host: str, *args: Any, **kwargs: Any) -> Any:
        if host == "hooks.example.com":  # public-looking name, inside answer (rebinding)
            return real("10.0.0.7", *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(egress_client.socket, "getaddrinfo", fake)
    decision = run(hook(tmp_path, f"http://hooks.example.com:{port}/hook"))
    assert "resolves to 10.0.0.7, which is private" in (decision.trace[0].error or "")


@pytest.mark.parametrize(
    ("address", "verdict"),
    [
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("10.1.2.3", "private"),
        ("192.168.1.1", "private"),
        ("::1", "loopback"),
        ("::ffff:10.0.0.1", "private"),
        ("2002:7f00:1::", "loopback"),  # 6to4 around 127.0.0.1
        ("169.254.1.1", "link-local"),
        ("100.64.0.1", "not globally routable"),
        ("93.184.216.34", None),
        ("2606:2800:220:1:248:1893:25c8:1946", None),
    ],
)
def test_destination_rules(address: str, verdict: str | None) -> None:
    problem = destination_problem(address, "h", EgressPolicy())
    if verdict is None:
        assert problem is None
    else:
        assert problem is not None and verdict in problem


def test_metadata_stays_refused_even_for_an_allowlisted_host() -> None:
    policy = EgressPolicy(allow_hosts=("metadata.internal",))
    assert destination_problem("169.254.169.254", "metadata.internal", policy) is not None
    assert destination_problem("10.0.0.1", "metadata.internal", policy) is None


def test_agent_headers_may_name_only_variables_the_operator_declared(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GUARD_TOKEN", "t0k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t")
    headers = '[action.http.headers]\nX-Token = "${AWS_SECRET_ACCESS_KEY}"'
    registry = HookRegistry(env_allowlist=("AWS_SECRET_ACCESS_KEY",))
    leaky = hook(tmp_path, f"http://127.0.0.1:{port}/hook", headers=headers)
    with pytest.raises(HookRegistrationError, match=r"security\.http_header_env"):
        registry.register_manifest(leaky)
    declared = EgressPolicy(allow_hosts=("127.0.0.1",), header_env=("GUARD_TOKEN",))
    fine = hook(
        tmp_path,
        f"http://127.0.0.1:{port}/hook",
        headers='[action.http.headers]\nX-Token = "${GUARD_TOKEN}"',
    )
    assert run(fine, declared).context == ["t0k"]


def test_an_operator_hook_keeps_the_env_allowlist_for_its_headers(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GUARD_TOKEN", "t0k")
    manifest = hook(
        tmp_path,
        f"http://127.0.0.1:{port}/hook",
        author="operator",
        headers='[action.http.headers]\nX-Token = "${GUARD_TOKEN}"',
    )
    registry = HookRegistry(env_allowlist=("GUARD_TOKEN",))
    registry.register_manifest(manifest)
    try:
        decision = registry.run(Event(kind="PreToolUse", payload={}))
    finally:
        registry.close()
    assert decision.context == ["t0k"]
