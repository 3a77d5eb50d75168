"""Approvals reach a person where they are: a hook's ``[approval] notify`` names the fleet's
notifiers, and each gets exactly one POST per parked request (a generic webhook with the
whole input and a link, a Slack-compatible one with a ``text``); a dead receiver delays
nothing and is counted in the worker's heartbeat. A real chain worker and local receivers."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import redis

from hookbus import HookBus
from hookbus.approvals.inbox import ApprovalInbox
from hookbus.bus.keys import Keys
from hookbus.bus.wire import Decision, Event
from hookbus.console import charts, data
from hookbus.console.render import Renderer
from hookbus.workers.fleet.heartbeat import list_workers
from tests.approval_helpers import cli, parked, settings_for, wait_for
from tests.wiped_helpers import chain_worker_cli

ASKING_HOOK = """\
name = "ask-deploys"
events = ["PreToolUse"]

[approval]
route = "operator"
wait_s = 60
notify = ["ops-webhook", "team-slack", "gone"]

[action.python]
entrypoint = "ask:check"
"""


@contextmanager
def receiver() -> Iterator[tuple[int, list[tuple[str, dict[str, Any]]]]]:
    got: list[tuple[str, dict[str, Any]]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            got.append((self.path, json.loads(self.rfile.read(length))))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], got
    finally:
        server.shutdown()
        server.server_close()


def dead_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_each_notifier_gets_one_post_per_parked_request_and_a_dead_one_is_counted(
    tmp_path: Path, real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    hooks = tmp_path / "hooks"
    (hooks / "ask-deploys").mkdir(parents=True)
    (hooks / "ask-deploys" / "HOOK.toml").write_text(ASKING_HOOK)
    (hooks / "ask-deploys" / "ask.py").write_text(
        "def check(event):\n    return {'outcome': 'ask', 'reason': 'a deploy needs a person'}\n"
    )
    with receiver() as (port, got):
        config = tmp_path / "hookbus.toml"
        config.write_text(
            '[security]\nhttp_allowlist = ["127.0.0.1"]\n'
            '[approvals]\nconsole_url = "https://console.example.com"\n'
            f'[notifiers.ops-webhook]\nkind = "webhook"\nurl = "http://127.0.0.1:{port}/hook"\n'
            f'[notifiers.team-slack]\nkind = "slack"\nurl = "http://127.0.0.1:{port}/slack"\n'
            f'[notifiers.gone]\nurl = "http://127.0.0.1:{dead_port()}/x"\n'
        )
        env = {"HOOKBUS_CONFIG": str(config)}
        with chain_worker_cli(real_redis_url, namespace, tmp_path, hooks_dir=hooks, env=env):
            first: list[float] = []
            out: list[Decision] = []

            def agent() -> None:
                bus = HookBus.from_url(real_redis_url, namespace)
                try:
                    payload = {"tool_name": "Bash", "tool_input": {"command": "deploy prod v42"}}
                    started = time.monotonic()
                    out.append(
                        bus.request(
                            Event(kind="PreToolUse", payload=payload, agent_id="ci-7"),
                            on_parked=lambda _: first.append(time.monotonic() - started),
                        )
                    )
                finally:
                    bus.close()

            thread = threading.Thread(target=agent, daemon=True)
            thread.start()
            inbox = ApprovalInbox(settings_for(real_redis_url, namespace))
            (item,) = parked(inbox)
            wait_for(lambda: len(got) >= 2, 10, "both live notifiers told")

            def failed() -> int:
                beats = list_workers(real_redis, Keys.for_namespace(namespace))
                return sum(int(b.extra.get("notifications_failed", 0)) for b in beats)

            wait_for(lambda: failed() == 1, 15, "the dead receiver counted")
            # and shown: status --json, the status text and the console's Overview
            shown = data.overview(settings_for(real_redis_url, namespace))
            assert shown["notifications_failed"] == 1
            text = cli(real_redis_url, namespace, "status")
            assert "NOTIFY: 1 approval notification(s) failed" in text.stdout
            page = Renderer(Path(data.__file__).parent / "templates").render(
                "overview_rows.html",
                {"s": shown, "chart": charts.activity(settings_for(real_redis_url, namespace))},
            )
            assert "1 notification(s) failed" in page
            time.sleep(0.5)  # nothing more arrives
            inbox.decide(item.id, "deny", who="operator:ann", note="not today")
            thread.join(15)

    by_path = {path: body for path, body in got}
    assert sorted(path for path, _ in got) == ["/hook", "/slack"], got  # one each
    webhook, slack = by_path["/hook"], by_path["/slack"]
    assert webhook["approval"]["id"] == item.id
    assert "deploy prod v42" in webhook["approval"]["full_input"]
    assert webhook["url"] == f"https://console.example.com/approvals#{item.id}"
    assert set(slack) == {"text"} and item.id in slack["text"]
    assert first and first[0] < 2.0, f"the ask reached the agent after {first} s"
    assert out[0].outcome == "deny"
