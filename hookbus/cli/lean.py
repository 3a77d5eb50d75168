"""Commands that run without typer, click, rich, redis-py or pydantic.

:func:`hookbus.cli.main` dispatches ``hookbus --version`` and a plain ``hookbus publish``
(no ``--wait``, no ``--file``) here, through its ``_LEAN`` table. A process that publishes
one event pays for the interpreter, msgspec (the wire format), the settings and one socket,
a fraction of what typer and redis-py cost (docs/performance.md). The
handlers answer exactly as the typer commands do (same output, errors and exit codes); an
argument they do not know returns ``None`` and the typer app handles the whole command.

The event is encoded by the SDK's own :func:`hookbus.bus.reqrep.encode_event` (which loads
msgspec, not redis-py) and sent with :mod:`hookbus.bus.resp` (one XADD over a socket, routed
to the right master on a Redis Cluster).
"""

from __future__ import annotations

import json
import sys
import time

from hookbus.cli.support import (
    EXIT_ERROR,
    EXIT_OK,
    exit_code_for,
    print_json,
    print_note,
    report_error,
)

TYPE_CHECKING = False  # see hookbus.cli: every import counts here
if TYPE_CHECKING:
    from typing import Any

    from hookbus.bus.settings.loader import Settings
    from hookbus.bus.wire import Event

#: Seconds a lean publish may take to connect and get its XADD answered.
PUBLISH_TIMEOUT_S = 5.0

#: ``publish`` options that take a value, by spelling, and their names.
_PUBLISH_VALUES = {
    "--payload": "payload",
    "-p": "payload",
    "--session": "session",
    "--agent": "agent",
}


def version(args: list[str], options: dict[str, Any]) -> int:
    """``hookbus --version``: the version from :mod:`hookbus._version` (no metadata scan)."""
    from hookbus._version import __version__

    sys.stdout.write(f"hookbus {__version__}\n")
    return EXIT_OK


def parse_payload(text: str) -> dict[str, Any]:
    """``--payload`` as a dict; ``ValueError`` with the message the user sees."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--payload is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ValueError('--payload must be a JSON object, like \'{"tool_name": "Bash"}\'')
    return value


def build_event(
    data: dict[str, Any], *, kind: str | None, session: str | None, agent: str | None
) -> Event:
    """An :class:`Event` from a JSON object, the command line filling what it lacks;
    ``ValueError`` with the message the user sees."""
    import msgspec

    from hookbus.bus.wire import Event

    obj = dict(data)
    if kind and "kind" not in obj:
        obj["kind"] = kind
    if session and "session_id" not in obj:
        obj["session_id"] = session
    if agent and "agent_id" not in obj:
        obj["agent_id"] = agent
    obj.setdefault("caller", {"source": "manual_cli"})
    if "kind" not in obj:
        raise ValueError('no kind: give KIND on the command line or a "kind" field')
    try:
        return msgspec.convert(obj, Event)
    except msgspec.ValidationError as exc:
        raise ValueError(str(exc)) from exc


def prepare_event(settings: Settings, event: Event) -> bytes:
    """The stored bytes of ``event``: kind made canonical (``UnknownEventKind``
    otherwise), then the SDK's encoder (payload checks, msgpack, size limit)."""
    import msgspec

    from hookbus.bus.reqrep import encode_event

    kind = settings.catalogue().resolve(event.kind).kind
    if kind != event.kind:
        event = msgspec.structs.replace(event, kind=kind)
    return encode_event(event, settings.streams.max_event_bytes)


def send_event(settings: Settings, data: bytes, session_id: str | None = None) -> str:
    """One XADD of prepared bytes to the event log over a plain socket; the entry id.

    The stream is that of ``session_id``'s partition (``HOOKBUS_PARTITIONS``), as the SDK
    chooses it; on a Redis Cluster the lean client sends it to the master of its slot."""
    from hookbus.bus import keys
    from hookbus.bus.resp import connect
    from hookbus.errors import RedisUnavailable

    partition = keys.partition_of(session_id, settings.partitions)
    stream = keys.partition_events(settings.namespace, partition)
    deadline = time.monotonic() + PUBLISH_TIMEOUT_S
    try:
        with connect(settings.effective_redis_url) as conn:
            entry_id = conn.call(
                "XADD",
                stream,
                "*",  # no MAXLEN: the dispatchers trim only what they took
                keys.ENTRY_FIELD,
                data,
                deadline=deadline,
            )
    except RedisUnavailable as exc:  # say which namespace too
        raise RedisUnavailable(exc.url, exc.reason, namespace=settings.namespace) from exc
    return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)


def published(settings: Settings, event: Event, entry_id: str, *, as_json: bool) -> None:
    """What ``hookbus publish`` prints: the event id, or a JSON object with it; and, for a
    blocking kind, a note on stderr that no guard ran on it (it went to the event log, which
    only observers read) and how to get a decision."""
    spec = settings.catalogue().resolve(event.kind)
    if spec.blocking:
        print_note(
            f"{spec.kind} was published as an event: no guard ran on it and nothing was "
            f"decided; to ask the chain workers for a decision run `hookbus publish "
            f"{spec.kind} --wait` (with the same --payload)"
        )
    if as_json:
        kind = settings.catalogue().canonical(event.kind)
        print_json({"event_id": event.id, "entry_id": entry_id, "kind": kind})
    else:
        sys.stdout.write(f"{event.id}\n")


def _parse_publish(args: list[str]) -> dict[str, Any] | None:
    """``KIND [--payload P] [--session S] [--agent A] [--json]``; ``None`` for anything else."""
    parsed: dict[str, Any] = {"json": False}
    positional: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if arg == "--json":
            parsed["json"] = True
            i += 1
        elif eq and name.startswith("--") and name in _PUBLISH_VALUES:
            parsed[_PUBLISH_VALUES[name]] = value
            i += 1
        elif arg in _PUBLISH_VALUES and i + 1 < len(args):
            parsed[_PUBLISH_VALUES[arg]] = args[i + 1]
            i += 2
        elif arg.startswith("-") and arg != "-":
            return None  # --wait, --file, --help, a typo: the typer command decides
        else:
            positional.append(arg)
            i += 1
    if len(positional) != 1:
        return None
    parsed["kind"] = positional[0]
    return parsed


def publish(args: list[str], options: dict[str, Any]) -> int | None:
    """``hookbus publish KIND ...`` without ``--wait`` or ``--file``."""
    parsed = _parse_publish(args)
    if parsed is None:
        return None
    as_json = bool(parsed["json"] or options.get("json"))
    from hookbus.errors import HookBusError

    try:
        from hookbus.bus.settings.loader import load_settings

        overrides = {k: options.get(k) for k in ("redis_url", "namespace", "log_level")}
        settings = load_settings(options.get("config"), overrides=overrides).settings
        if not _logging_configured(options.get("log_level") or settings.log_level):
            return None  # a bad level: the typer path reports it as a usage error
        raw = parsed.get("payload")
        text = (sys.stdin.read() if raw == "-" else raw) if raw is not None else ""
        event = build_event(
            {"payload": parse_payload(text)},
            kind=parsed["kind"],
            session=parsed.get("session"),
            agent=parsed.get("agent"),
        )
        entry_id = send_event(settings, prepare_event(settings, event), event.session_id)
    except HookBusError as exc:
        report_error(str(exc), as_json=as_json)
        return exit_code_for(exc)
    except ValueError as exc:
        report_error(str(exc), as_json=as_json)
        return EXIT_ERROR
    published(settings, event, entry_id, as_json=as_json)
    return EXIT_OK


def _logging_configured(level: str) -> bool:
    """Configure logging as the root command does; ``False`` when ``level`` is not one."""
    if level.upper() == "WARNING":
        return True  # what Python does with no configuration: nothing to import
    import logging

    if not isinstance(logging.getLevelName(level.upper()), int):
        return False
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return True
