"""A local fake of the OpenAI Responses API, enough to drive the real Codex CLI offline.

Codex with a model provider whose ``base_url`` is this server streams ``POST /v1/responses``
(server-sent events: ``response.created``, ``response.output_item.done`` per output item,
``response.completed``). The script: a request whose input ends without a
``function_call_output`` is answered with a call of Codex's shell tool (whichever of its
shell tools the request offers, with that tool's argument shape); one whose input ends with
a ``function_call_output`` is answered with a short text, and the output is recorded (that
is where a hook's deny reason reaches the model).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: Codex's shell tools, most preferred first, and how each takes a command line.
SHELL_TOOLS: tuple[tuple[str, str], ...] = (
    ("shell_command", "command"),
    ("exec_command", "cmd"),
    ("shell", "argv"),
)


def _tool_names(body: dict[str, Any]) -> list[str]:
    names = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            name = tool.get("name") or (tool.get("function") or {}).get("name")
            if isinstance(name, str):
                names.append(name)
    return names


def shell_call(body: dict[str, Any], command: str) -> tuple[str, dict[str, Any]]:
    """The call of the request's shell tool that runs ``command``."""
    offered = _tool_names(body)
    for name, shape in SHELL_TOOLS:
        if name in offered:
            if shape == "argv":
                return name, {"command": ["bash", "-lc", command]}
            return name, {shape: command}
    raise AssertionError(f"the request offers no shell tool: {offered}")


class FakeCodexModel:
    """The script (shell commands to ask for) and what came back (tool outputs)."""

    def __init__(self, commands: list[str], final_text: str = "Noted.") -> None:
        self.commands = list(commands)
        self.final_text = final_text
        self.results: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._n = 0

    def answer(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The output items for one request."""
        with self.lock:
            self.requests.append(body)
            items = [i for i in body.get("input") or [] if isinstance(i, dict)]
            last = items[-1] if items else {}
            if last.get("type") in ("function_call_output", "custom_tool_call_output"):
                self.results.append(last)
                return [_text(self.final_text)]
            if body.get("tools") and self.commands:
                name, args = shell_call(body, self.commands.pop(0))
                self._n += 1
                return [
                    {
                        "type": "function_call",
                        "id": f"fc_fake{self._n:04d}",
                        "call_id": f"call_fake{self._n:04d}",
                        "name": name,
                        "arguments": json.dumps(args),
                        "status": "completed",
                    }
                ]
            return [_text(self.final_text)]

    def result_texts(self) -> list[str]:
        texts = []
        for result in self.results:
            output = result.get("output")
            texts.append(output if isinstance(output, str) else json.dumps(output))
        return texts


def _text(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_fake",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _sse(items: list[dict[str, Any]]) -> bytes:
    def event(data: dict[str, Any]) -> str:
        return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"

    response = {"id": "resp_fake", "object": "response", "status": "in_progress", "output": []}
    out = [event({"type": "response.created", "response": response})]
    for index, item in enumerate(items):
        out.append(
            event({"type": "response.output_item.added", "output_index": index, "item": item})
        )
        out.append(
            event({"type": "response.output_item.done", "output_index": index, "item": item})
        )
    done = dict(
        response,
        status="completed",
        output=items,
        usage={
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        },
    )
    out.append(event({"type": "response.completed", "response": done}))
    return "".join(out).encode()


@contextmanager
def serve(model: FakeCodexModel) -> Iterator[str]:
    """Run the fake on a free local port; yields its base URL (``.../v1``)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            if not isinstance(body, dict):
                body = {}
            if self.path.split("?", 1)[0].rstrip("/").endswith("/responses"):
                payload = _sse(model.answer(body))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            else:
                self._json({})

        def do_GET(self) -> None:
            self._json({"data": [], "models": []})

        def _json(self, data: Any) -> None:
            payload = json.dumps(data).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
