"""A local fake of the Gemini API, enough to drive the real Gemini CLI offline.

Gemini CLI with ``security.auth.selectedType: "gemini-api-key"`` talks to
``$GOOGLE_GEMINI_BASE_URL`` with the genai SDK:
``POST /v1beta/models/<model>:streamGenerateContent?alt=sse`` for the conversation
(server-sent events, one ``GenerateContentResponse`` per ``data:`` line),
``:generateContent`` for side questions (the model router) and ``:countTokens``. The
script: a conversation whose last turn carries no ``functionResponse`` is answered with a
``functionCall`` of the next scripted tool call (``run_shell_command``); one that carries a
``functionResponse`` is answered with a short text, and the response is recorded (that is
where a hook's deny reason reaches the model).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeGemini:
    """The script (tool calls to ask for) and what came back (function responses)."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]], final_text: str = "Noted.") -> None:
        self.calls = list(calls)
        self.final_text = final_text
        self.results: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The model's ``GenerateContentResponse`` for one conversation request."""
        with self.lock:
            self.requests.append(body)
            contents = body.get("contents") or []
            last = contents[-1] if contents else {}
            parts = last.get("parts") if isinstance(last, dict) else None
            responses = [
                part["functionResponse"]
                for part in (parts if isinstance(parts, list) else [])
                if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict)
            ]
            if responses:
                self.results.extend(responses)
                return _response([{"text": self.final_text}])
            if body.get("tools") and self.calls:
                name, args = self.calls.pop(0)
                return _response([{"functionCall": {"name": name, "args": args}}])
            return _response([{"text": self.final_text}])

    def result_texts(self) -> list[str]:
        """Each recorded function response as text (its ``output`` / ``error`` fields)."""
        return [json.dumps(result.get("response", result)) for result in self.results]


def _response(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": "gemini-2.5-flash",
    }


def _side_answer(body: dict[str, Any]) -> dict[str, Any]:
    """A non-streaming ``generateContent``: side questions asked for JSON get a plausible
    object (the router's choice, the next-speaker check), others a short text."""
    config = body.get("generationConfig") or body.get("config") or {}
    if isinstance(config, dict) and config.get("responseMimeType") == "application/json":
        text = json.dumps(
            {
                "reasoning": "fake",
                "model_choice": "flash",
                "next_speaker": "user",
                "complexity_reasoning": "fake",
                "complexity_score": 1,
            }
        )
    else:
        text = "ok"
    return _response([{"text": text}])


@contextmanager
def serve(model: FakeGemini) -> Iterator[str]:
    """Run the fake on a free local port; yields its base URL (for GOOGLE_GEMINI_BASE_URL)."""

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
            path = self.path.split("?", 1)[0]
            if path.endswith(":countTokens"):
                self._json({"totalTokens": 10})
            elif path.endswith(":streamGenerateContent"):
                message = model.answer(body)
                payload = f"data: {json.dumps(message)}\r\n\r\n".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            elif path.endswith(":generateContent"):
                self._json(_side_answer(body))
            else:
                self._json({})

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
