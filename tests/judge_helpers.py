"""A fake OpenAI-compatible chat completions server for the judge hook tests: each answer is
scripted (a verdict, a body, a status, a delay), every call is counted and kept."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class Answer:
    """What the fake server sends: ``content`` as the model's message (or ``body`` as the
    whole body), with ``status``, after ``delay_s``."""

    content: str | None = None
    body: bytes | None = None
    status: int = 200
    delay_s: float = 0.0
    finish_reason: str = "stop"
    refusal: str | None = None


def verdict(outcome: str, reason: str, **kwargs: Any) -> Answer:
    return Answer(content=json.dumps({"outcome": outcome, "reason": reason}), **kwargs)


@dataclass
class FakeJudge:
    """The server's script (``answer``: the request body to an :class:`Answer`) and what it
    was sent."""

    answer: Callable[[dict[str, Any]], Answer]
    calls: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@contextmanager
def fake_judge(answer: Callable[[dict[str, Any]], Answer]) -> Iterator[FakeJudge]:
    judge = FakeJudge(answer)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            with judge.lock:
                judge.calls.append(request)
                judge.headers.append({k.lower(): v for k, v in self.headers.items()})
            scripted = judge.answer(request)
            time.sleep(scripted.delay_s)
            body = scripted.body
            if body is None:
                message: dict[str, Any] = {"role": "assistant", "content": scripted.content}
                if scripted.refusal is not None:
                    message["refusal"] = scripted.refusal
                body = json.dumps(
                    {
                        "choices": [{"message": message, "finish_reason": scripted.finish_reason}],
                        "usage": {"prompt_tokens": 50, "completion_tokens": 12},
                    }
                ).encode()
            try:
                self.send_response(scripted.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass  # the caller gave up (its timeout)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    judge.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield judge
    finally:
        server.shutdown()
        server.server_close()


def write_judge_hook(
    root: Path,
    endpoint: str,
    *,
    name: str = "prod-judge",
    extra: str = "",
    action_extra: str = "",
    timeout_s: float = 2.0,
) -> Path:
    """A judge guard on PreToolUse shown the command (``guard = true``: it fails closed)."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "HOOK.toml").write_text(
        f'name = "{name}"\nevents = ["PreToolUse"]\nguard = true\non_error = "deny"\n{extra}'
        "[action.llm]\n"
        f'endpoint = "{endpoint}"\nmodel = "guard-small"\n'
        'instructions = "You decide whether a shell command may touch production."\n'
        'input = "{payload.tool_input.command}"\n'
        f"timeout_secs = {timeout_s}\n{action_extra}"
    )
    return folder
