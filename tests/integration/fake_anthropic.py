"""A local fake of the Anthropic Messages API, enough to drive the real Claude Code offline.

``POST /v1/messages`` (streaming SSE or plain JSON): a conversation whose last user turn
carries no tool result is answered with a ``tool_use`` of the next scripted tool call; one
that carries a tool result is answered with a short text and the result is recorded (that
is where a hook's deny reason reaches the model). Requests without tools (titles, topic
checks) get a short text. Everything else answers 200 with an empty JSON object.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeModel:
    """The script (tool calls to ask for) and what came back (tool results)."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]], final_text: str = "Noted.") -> None:
        self.calls = list(calls)
        self.final_text = final_text
        self.results: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._n = 0

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The assistant message for one request."""
        with self.lock:
            self.requests.append(body)
            messages = body.get("messages") or []
            last = messages[-1] if messages else {}
            content = last.get("content") if isinstance(last, dict) else None
            results = [
                block
                for block in (content if isinstance(content, list) else [])
                if isinstance(block, dict) and block.get("type") == "tool_result"
            ]
            if results:
                self.results.extend(results)
                return _message([{"type": "text", "text": self.final_text}], "end_turn")
            if body.get("tools") and self.calls:
                name, tool_input = self.calls.pop(0)
                self._n += 1
                block = {
                    "type": "tool_use",
                    "id": f"toolu_fake{self._n:04d}",
                    "name": name,
                    "input": tool_input,
                }
                return _message([block], "tool_use")
            return _message([{"type": "text", "text": self.final_text}], "end_turn")

    def result_texts(self) -> list[str]:
        texts = []
        for result in self.results:
            content = result.get("content")
            if isinstance(content, list):
                content = " ".join(
                    part.get("text", "") for part in content if isinstance(part, dict)
                )
            texts.append(str(content))
        return texts


def _message(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _sse(message: dict[str, Any]) -> Iterator[bytes]:
    def event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    start = {**message, "content": [], "stop_reason": None}
    yield event("message_start", {"type": "message_start", "message": start})
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            yield event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            head = {**block, "input": {}}
            yield event(
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": head},
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield event(
            "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
        )
        yield event("content_block_stop", {"type": "content_block_stop", "index": i})
    yield event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
    )
    yield event("message_stop", {"type": "message_stop"})


@contextmanager
def serve(model: FakeModel) -> Iterator[str]:
    """Run the fake on a free local port; yields its base URL."""

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
            if not self.path.startswith("/v1/messages") or self.path.startswith(
                "/v1/messages/count_tokens"
            ):
                self._json({"input_tokens": 10} if "count_tokens" in self.path else {})
                return
            message = model.answer(body if isinstance(body, dict) else {})
            if isinstance(body, dict) and body.get("stream"):
                payload = b"".join(_sse(message))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            else:
                self._json(message)

        def do_GET(self) -> None:
            self._json({})

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
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
