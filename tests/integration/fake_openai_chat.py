"""A local fake of the OpenAI Chat Completions API, enough to drive GitHub Copilot CLI, Qwen
Code and Cline offline.

The CLIs, pointed at this server (``COPILOT_PROVIDER_BASE_URL`` / ``OPENAI_BASE_URL`` /
``cline auth -b``), call
``POST /v1/chat/completions`` (streamed or not). The script: a request that holds no new tool
result (``role: "tool"``) is answered with a call of the request's shell tool (whichever the
request offers, with that tool's argument shape), or of a tool the script names with its
arguments, while steps remain; one that holds a new tool result, wherever it stands (Qwen
Code may add a reminder message after it), is answered with a short text (or, with
``one_task``, the next step), and the result is recorded: that is where a hook's deny
reason reaches the model.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: The CLIs' shell tools, most preferred first, and the argument holding the command line.
SHELL_TOOLS: tuple[tuple[str, str], ...] = (
    ("bash", "command"),
    ("run_shell_command", "command"),
    ("shell", "command"),
    ("powershell", "command"),
    ("run_commands", "commands"),
)
#: Shell tools whose argument is a list of command lines (Cline's ``run_commands``).
LIST_ARGS = frozenset({"run_commands"})
#: Extra arguments a shell tool requires besides its command.
EXTRA_ARGS: dict[str, dict[str, Any]] = {
    "bash": {"description": "run it", "mode": "sync", "initial_wait": 30},
    "run_shell_command": {"description": "run it", "is_background": False},
}


def tool_names(body: dict[str, Any]) -> list[str]:
    names = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            name = (tool.get("function") or {}).get("name") or tool.get("name")
            if isinstance(name, str):
                names.append(name)
    return names


def shell_call(body: dict[str, Any], command: str) -> tuple[str, dict[str, Any]]:
    """The call of the request's shell tool that runs ``command``."""
    offered = tool_names(body)
    for name, arg in SHELL_TOOLS:
        if name in offered:
            value: str | list[str] = [command] if name in LIST_ARGS else command
            return name, {arg: value, **EXTRA_ARGS.get(name, {})}
    raise AssertionError(f"the request offers no shell tool: {offered}")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") for part in content if isinstance(part, dict)
        ) or json.dumps(content)
    return json.dumps(content)


class FakeChatModel:
    """The script (shell commands to ask for) and what came back (tool results)."""

    def __init__(
        self,
        commands: list[str | tuple[str, dict[str, Any]]],
        final_text: str = "Noted.",
        *,
        one_task: bool = False,
    ) -> None:
        self.commands = list(commands)
        self.final_text = final_text
        #: after a tool result, ask for the next command (one task runs them all) instead
        #: of answering with text
        self.one_task = one_task
        self.results: list[str] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._n = 0
        self._seen = 0

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The assistant message for one request (``content`` or ``tool_calls``)."""
        with self.lock:
            self.requests.append(body)
            messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
            tool_results = [m for m in messages if m.get("role") == "tool"]
            if len(tool_results) > self._seen:
                # a tool result new in this request (a CLI may add a reminder after it)
                for message in tool_results[self._seen :]:
                    self.results.append(_text_of(message.get("content")))
                self._seen = len(tool_results)
                if not (self.one_task and self.commands):
                    return {"role": "assistant", "content": self.final_text}
            if body.get("tools") and self.commands:
                step = self.commands.pop(0)  # a shell command, or (tool, arguments)
                name, args = step if isinstance(step, tuple) else shell_call(body, step)
                self._n += 1
                return {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"call_fake{self._n:04d}",
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)},
                        }
                    ],
                }
            return {"role": "assistant", "content": self.final_text}

    def result_texts(self) -> list[str]:
        with self.lock:
            return list(self.results)


def _completion(message: dict[str, Any], model: str) -> dict[str, Any]:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _chunks(message: dict[str, Any], model: str) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        data = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(data)}\n\n"

    out = [chunk({"role": "assistant", "content": ""})]
    calls = message.get("tool_calls")
    if calls:
        delta_calls = [dict(call, index=i) for i, call in enumerate(calls)]
        out.append(chunk({"tool_calls": delta_calls}))
        out.append(chunk({}, "tool_calls"))
    else:
        out.append(chunk({"content": message.get("content") or ""}))
        out.append(chunk({}, "stop"))
    usage = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    out.append(f"data: {json.dumps(usage)}\n\n")
    out.append("data: [DONE]\n\n")
    return "".join(out).encode()


@contextmanager
def serve(model: FakeChatModel) -> Iterator[str]:
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
            if not self.path.split("?", 1)[0].rstrip("/").endswith("/chat/completions"):
                self._send(404, "application/json", b'{"error": "not found"}')
                return
            message = model.answer(body)
            name = str(body.get("model") or "fake-model")
            if body.get("stream"):
                self._send(200, "text/event-stream", _chunks(message, name))
            else:
                self._send(200, "application/json", json.dumps(_completion(message, name)).encode())

        def do_GET(self) -> None:
            data = {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
            self._send(200, "application/json", json.dumps(data).encode())

        def _send(self, status: int, content_type: str, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
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
