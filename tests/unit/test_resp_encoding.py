"""Every hand-packed command parses back (with hiredis, an independent RESP parser) into
exactly the arguments its header counts, and every EVALSHA of the reply script carries the
KEYS / ARGV layout reqrep.lua reads. Hand-packing lives in one module: no other module of
the package writes RESP framing itself."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any
from unittest import mock

import fakeredis
import hiredis
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookbus.bus import reqrep
from hookbus.bus import resp as encode
from hookbus.bus.keys import Keys
from hookbus.bus.settings.schema import Settings
from hookbus.bus.wire import Decision, Event
from hookbus.producers.inbox_ttl import InboxTTL
from hookbus.producers.sync_connections import ConnectionInbox
from hookbus.workers.chain import ledger as ledger_module
from hookbus.workers.chain.replier import Ack, Dead, Replier

PACKAGE = Path(__file__).resolve().parents[2] / "hookbus"
KEYS = Keys.for_namespace("tenc")


def parse_all(data: bytes) -> list[list[bytes]]:
    """The commands in ``data``: each an array of bulk strings, nothing left over."""
    reader = hiredis.Reader()
    reader.feed(data)
    out = []
    while True:
        command = reader.gets()
        if command is False:
            break
        assert isinstance(command, list), command
        assert all(isinstance(arg, bytes) for arg in command), command
        out.append(command)
    assert not reader.has_data(), "bytes left after the last complete command"
    return out


def parse_one(data: bytes) -> list[bytes]:
    [command] = parse_all(data)
    return command


def reply_script_layout() -> tuple[int, int, int]:
    """(fixed KEYS, fixed ARGV, ARGV per request) as reqrep.lua reads them."""
    source = reqrep.reply_script_source()
    keys = re.search(r"for i = 1, #KEYS - (\d+) do", source)
    base = re.search(r"local a = (\d+) \+ (\d+) \* \(i - 1\)", source)
    assert keys and base, "reqrep.lua no longer has the loop this test reads"
    per_request = int(base.group(2))
    highest = max(int(n) for n in re.findall(r"ARGV\[a \+ (\d+)\]", source))
    assert highest == per_request, "a request's last argument is not where the loop says"
    fixed_argv = max(int(n) for n in re.findall(r"ARGV\[(\d+)\]", source))
    assert fixed_argv == int(base.group(1))
    return int(keys.group(1)), fixed_argv, per_request


def replier() -> Replier:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer(), protocol=2)
    return Replier(client, Settings(namespace="tenc"), KEYS, "w-1", mock.Mock())


def decision_event(i: int) -> tuple[Event, Decision]:
    event = Event(
        kind="PreToolUse",
        session_id=f"s{i}",
        agent_id="a" * i,
        payload={"tool_name": "Bash", "tool_input": {"command": f"rm -rf /tmp/{i}"}},
        reply_to=KEYS.reply(f"r{i}") if i % 2 else KEYS.inbox(f"p{i}"),
    )
    return event, Decision(outcome="deny" if i % 3 else "allow", reason="r" * i)


@given(st.integers(min_value=1, max_value=6), st.integers(min_value=0, max_value=3))
def test_a_batch_of_guarded_answers_parses_back_to_the_scripts_layout(
    replies: int, others: int
) -> None:
    fixed_keys, fixed_argv, per_request = reply_script_layout()
    rep = replier()
    ops: list[Any] = []
    for i in range(replies):
        event, decision = decision_event(i)
        ops.append(rep.reply_op(f"{i}-0".encode(), event, decision, 1.5))
    for j in range(others):
        ops.append(Ack(f"9{j}-0".encode()))
        ops.append(Dead(f"8{j}-0".encode(), {b"e": b"\x81"}, deliveries=5, reason="poison"))
    batch = rep.commands(ops)
    commands = parse_all(b"".join(batch.commands))
    assert len(commands) == len(batch.commands)
    [script] = [c for c in commands if c[0] == b"EVALSHA"]
    assert script[1] == hashlib.sha1(reqrep.reply_script_source().encode()).hexdigest().encode()
    numkeys = int(script[2])
    assert numkeys == fixed_keys + replies
    argv = script[3 + numkeys :]
    assert len(argv) == fixed_argv + per_request * replies
    for i in range(replies):  # each request's arguments where the script reads them
        mine = argv[fixed_argv + per_request * i : fixed_argv + per_request * (i + 1)]
        assert mine[1] == f"{i}-0".encode()  # +1 entry id
        assert mine[7] == b"w-1"  # +7 worker, the consumer the script checks
        assert mine[12:14] == [b"Bash", f"rm -rf /tmp/{i}".encode()]  # +12 tool, +13 input
    assert [c[0] for c in commands].count(b"XACK") == 2 * others
    assert [c[0] for c in commands].count(b"XADD") == others


def test_an_unguarded_answer_parses_back_as_the_inbox_xadd() -> None:
    rep = replier()
    event, decision = decision_event(2)
    reply = rep.reply_op(b"1-0", event, decision, 0.5)
    command = parse_one(rep.inbox_add(reply))
    assert command[:7] == [
        b"XADD",
        event.reply_to.encode() if event.reply_to else b"",
        b"NOMKSTREAM",
        b"MAXLEN",
        b"~",
        str(reqrep.INBOX_MAXLEN).encode(),
        b"*",
    ]
    assert command[7:9] == [reqrep.INBOX_ID_FIELD, reply.request_id.encode()]
    assert command[9] == reqrep.INBOX_DECISION_FIELD and len(command) == 11


def test_the_ledgers_transaction_parses_back(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[list[bytes]] = []

    def capture(client: Any, commands: list[bytes]) -> list[Any]:
        sent.append(commands)
        return [b"OK", b"QUEUED", b"QUEUED", b"QUEUED", [b"1-0", 2, 2]]

    monkeypatch.setattr(ledger_module, "send_pooled", capture)
    rep = replier()
    held = [(b"1-0", b"\x81\xa1a\x01", 0), (b"2-0", b"\x81\xa1b\x02", 0)]
    assert rep.ledger._settle_held(held) == (2, 2)  # type: ignore[arg-type]
    commands = parse_all(b"".join(sent[0]))
    assert [c[0] for c in commands] == [b"MULTI", b"XADD", b"XACK", b"INCRBY", b"EXEC"]
    assert commands[2] == [b"XACK", KEYS.requests.encode(), b"chain", b"1-0", b"2-0"]


def test_the_producers_request_and_inbox_commands_parse_back() -> None:
    head = reqrep.request_xadd_head(KEYS.requests)
    assert parse_one(head + encode.bulk(b"\x00data")) == [
        b"XADD",
        KEYS.requests.encode(),
        b"*",  # no MAXLEN: only the consumers trim, below what every group took
        reqrep.REQUEST_FIELD,
        b"\x00data",
    ]
    inbox = ConnectionInbox(KEYS.inbox("p1"))
    assert parse_one(inbox.xread(2)) == [
        b"XREAD",
        b"COUNT",
        b"1",
        b"BLOCK",
        b"2000",
        b"STREAMS",
        KEYS.inbox("p1").encode(),
        b"0-0",
    ]
    renewal = InboxTTL(KEYS.inbox("p1")).renewal(1000)
    assert renewal is not None
    # the keep-alive: a transaction that makes the inbox if missing and sets its expiry
    inbox_key = KEYS.inbox("p1").encode()
    multi, create, expire, execute = parse_all(renewal)
    assert (multi, execute) == ([b"MULTI"], [b"EXEC"])
    assert create == [b"XGROUP", b"CREATE", inbox_key, b"keepalive", b"$", b"MKSTREAM"]
    assert expire[:2] == [b"PEXPIRE", inbox_key] and int(expire[2]) > 0


@given(st.lists(st.one_of(st.binary(), st.text(), st.integers()), min_size=1, max_size=8))
def test_pack_round_trips_any_arguments(args: list[Any]) -> None:
    expected = [a if isinstance(a, bytes) else str(a).encode() for a in args]
    assert parse_one(encode.pack(*args)) == expected
    assert parse_one(
        encode.prefix(len(args), *args[:1]) + b"".join(map(encode.bulk, args[1:]))
    ) == (expected)


def test_no_module_outside_the_encoder_writes_resp_framing() -> None:
    # a bytes literal that frames RESP: an array or bulk header, or a line end
    framing = re.compile(r"""b["'](\*\d|\$\d|[^"']*\\r\\n)""")
    found = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in PACKAGE.rglob("*.py")
        if path.parent.name != "resp"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if framing.search(line)
    ]
    assert found == []
