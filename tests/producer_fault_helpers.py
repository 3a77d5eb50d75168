"""Test doubles for the producer's fault tests: a TCP proxy in front of the real Redis whose
link can be stalled, reset or slowed, and a chain worker that answers exactly as the
request contract says (fresh ``request_id``, reply to ``reply_to``), so a test can script
late, forged or mismatched replies."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import redis

from hookbus.bus import reqrep
from hookbus.bus.keys import Keys
from hookbus.bus.wire import Decision, Event, encode, now_ms


class FaultProxy:
    """Forwards TCP to the real server while ``mode`` is ``pass``.

    ``stall``: bytes are taken and never forwarded (a stalled server or a half-open link);
    ``reset``: open links are reset and new ones reset at accept; ``slow``: every chunk
    waits ``delay_s`` before it is forwarded.
    """

    def __init__(self, upstream_url: str) -> None:
        parts = urlsplit(upstream_url)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 6379)
        self.mode = "pass"
        self.delay_s = 0.0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._links: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def set_mode(self, mode: str, delay_s: float = 0.0) -> None:
        self.mode, self.delay_s = mode, delay_s
        if mode == "reset":
            with self._lock:
                links, self._links = self._links, []
            for sock in links:
                _reset(sock)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            links, self._links = self._links, []
        for sock in links:
            _reset(sock)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.mode == "reset":
                _reset(client)
                continue
            upstream = socket.create_connection(self.upstream)
            with self._lock:
                self._links += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self._closed:
                ready, _, _ = select.select([src], [], [], 0.05)
                if not ready:
                    continue
                data = src.recv(65536)
                if not data:
                    break
                while self.mode == "stall" and not self._closed:
                    time.sleep(0.005)  # hold what was sent: nothing is ever answered
                if self.mode == "slow":
                    time.sleep(self.delay_s)
                dst.sendall(data)
        except (OSError, ValueError):  # the other direction closed the sockets
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.close()


def _reset(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()


@dataclass
class Reply:
    """One answer the contract worker sends: after ``delay_s``, ``decision`` goes to the
    request's ``reply_to``; on an inbox it is filed under ``inbox_id`` (default: the
    request id)."""

    decision: Decision
    delay_s: float = 0.0
    inbox_id: str | None = None


Script = Callable[[Event], list[Reply]]


def answer_by_contract(event: Event) -> list[Reply]:
    """What a chain worker sends: one decision carrying the request's id."""
    return [Reply(Decision(outcome="allow", request_id=event.request_id, worker="contract"))]


class ContractWorker:
    """A chain worker double in a thread: heartbeats, reads the request stream, answers what
    ``script`` says, one request after the other (so a slow answer delays the next)."""

    def __init__(self, url: str, ns: str, script: Script = answer_by_contract) -> None:
        self.client = redis.Redis.from_url(url, protocol=2)
        self.keys = Keys.for_namespace(ns)
        self.script = script
        self.seen: list[Event] = []
        self._stop = threading.Event()
        self._beat()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        beat = {"id": "contract", "role": "chain", "last_ms": now_ms()}
        self.client.hset(self.keys.workers, "contract", json.dumps(beat))

    def _run(self) -> None:
        last = "0-0"  # a fresh namespace: every request, even one sent before the first read
        while not self._stop.is_set():
            self._beat()
            found = self.client.xread({self.keys.requests: last}, count=10, block=50)
            for _, entries in found:
                for entry_id, fields in entries:
                    last = entry_id
                    event = reqrep.decode_request(fields)
                    self.seen.append(event)
                    for reply in self.script(event):
                        time.sleep(reply.delay_s)
                        self._send(event, reply)

    def _send(self, event: Event, reply: Reply) -> None:
        target = event.reply_to or ""
        data = encode(reply.decision)
        if reqrep.reply_mode(self.keys, target) == "s":
            inbox_id = reply.inbox_id or event.request_id or event.id
            self.client.xadd(
                target, {reqrep.INBOX_ID_FIELD: inbox_id, reqrep.INBOX_DECISION_FIELD: data}
            )
        else:
            self.client.rpush(target, data)
            self.client.pexpire(target, 10_000)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.client.close()
