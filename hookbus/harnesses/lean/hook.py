"""``hookbus <cli> hook``: one agent-CLI event in, that CLI's exact answer out.

This runs as its own process for every event an agent CLI fires, so its cost is paid on
every tool call. It imports neither redis-py, typer, rich, pydantic, rq nor msgspec:
``_json`` (:mod:`hookbus.bus.lean_json`) for the CLI's JSON, :mod:`hookbus.bus.resp` for Redis, and
:mod:`hookbus.harnesses.lean.msgpack` for the bus's msgpack wire
(``tests/unit/test_harness_imports.py`` holds it to that).

Flow: read stdin (always, all of it) -> ``stop_hook_active: true`` on a Stop exits 0 at once ->
route the event through the adapter table -> *publish* (one XADD to the event log, exit 0
at once) or *request* (check a chain worker is alive, XADD the request + BLPOP its reply in
one round trip, bounded by a deadline below the hook entry's timeout) -> print the CLI's
output. Nothing but valid JSON ever reaches stdout: Claude Code lets a tool run when stdout
is not JSON, even with ``onFailure: "block"``.
"""

from __future__ import annotations

import os
import sys
import time

from hookbus.bus import ids, keys, lean_json
from hookbus.bus.policy.guarded import FailPolicy, fails_closed
from hookbus.bus.resp import connect
from hookbus.bus.resp.client import RespTimeout
from hookbus.errors import HookBusError, RedisCommandError, RedisUnavailable
from hookbus.harnesses.adapters import (
    PUBLISH,
    REQUEST,
    Adapter,
    Answer,
    Output,
    Route,
    adapter,
)
from hookbus.harnesses.lean.config import LeanConfig, load
from hookbus.harnesses.lean.msgpack import MsgpackError, packb, unpackb

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, BinaryIO, TextIO

    from hookbus.bus.policy.liveness import Liveness as Liveness
    from hookbus.bus.resp.client import RespConnection
    from hookbus.bus.resp.cluster import ClusterConnection

    Connection = RespConnection | ClusterConnection

#: Time kept back from the hook entry's timeout for this process's own start and exit, ms.
START_MARGIN_MS = 500
#: Claude Code's default command-hook timeout, used when the command is not told, in s.
DEFAULT_ENTRY_TIMEOUT_S = 60.0
#: Kinds whose ``stop_hook_active`` ends the call at once; elsewhere the field means nothing.
STOP_KINDS = ("Stop", "SubagentStop")
#: Exit code for input that is not the CLI's hook JSON: 2 makes a guard event block.
EXIT_BAD_INPUT = 2


class BusUnavailable(Exception):
    """The bus could not answer; ``args[0]`` says why in a user's words."""


def build_event(
    harness: Adapter, route: Route, data: Mapping[str, Any], environ: Mapping[str, str]
) -> dict[str, Any]:
    """The bus Event (as the dict msgspec encodes) for one CLI input."""
    payload = {k: v for k, v in data.items() if k not in harness.meta_keys and k != "session_id"}
    tool = payload.get("tool_name")
    if isinstance(tool, str):
        canonical = harness.canonical_tool(tool)
        if canonical != tool:
            payload["tool_name"] = canonical
            payload["harness_tool_name"] = tool
    meta: dict[str, Any] = {"harness": harness.name, "event_name": route.name}
    for key in harness.meta_keys:
        if key in data and key != "hook_event_name":
            meta[key] = data[key]
    session = data.get("session_id")
    event: dict[str, Any] = {
        "kind": route.kind,
        "id": ids.new_id(),
        "ts": ids.now_ms(),
        "payload": payload,
        "caller": {"source": "ai_session"},
        "meta": meta,
    }
    if isinstance(session, str):
        event["session_id"] = session
    agent = ids.agent_id_from(environ) or data.get("agent_id")
    if isinstance(agent, str) and agent:
        event["agent_id"] = agent
    return event


def _too_large(size: int, cfg: LeanConfig) -> str:
    return (
        f"the event is {size} bytes, over streams.max_event_bytes ({cfg.max_event_bytes}); "
        "raise it in hookbus.toml"
    )


def publish(conn: Connection, cfg: LeanConfig, event: dict[str, Any]) -> None:
    """One XADD to the event log of the session's partition, the stream the SDK would
    choose (never retried: a retry could publish twice)."""
    data = packb(event)
    if len(data) > cfg.max_event_bytes:
        raise BusUnavailable(_too_large(len(data), cfg))
    deadline = time.monotonic() + 2.0
    session = event.get("session_id")
    partition = keys.partition_of(session if isinstance(session, str) else None, cfg.partitions)
    conn.call(
        "XADD",
        keys.partition_events(cfg.namespace, partition),
        "*",  # no MAXLEN: the dispatchers trim only what they took
        keys.ENTRY_FIELD,
        data,
        deadline=deadline,
    )


def __getattr__(name: str) -> object:
    # the liveness cache, for long-lived callers (the gateway), from the module both the SDK
    # and this command judge heartbeats with; loaded only by a request, not a publish
    if name == "Liveness":
        from hookbus.bus.policy.liveness import Liveness

        return Liveness
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def request(
    conn: Connection,
    cfg: LeanConfig,
    event: dict[str, Any],
    budget_ms: int,
    liveness: Liveness | None = None,
    guards: FailPolicy | None = None,
) -> dict[str, Any]:
    """Send ``event`` as a blocking request; the decoded Decision, or BusUnavailable.
    ``guards`` takes the published failure policy, read with the heartbeats."""
    from hookbus.bus.policy import liveness as bus_liveness

    end = time.monotonic() + budget_ms / 1000
    alive = liveness.fresh() if liveness is not None else None
    if alive is None:
        workers, now, policy = conn.pipeline(
            [*bus_liveness.commands(cfg.namespace), ("GET", keys.fail_policy(cfg.namespace))],
            deadline=end,
        )
        if guards is not None and not isinstance(policy, RedisCommandError):
            guards.update(policy)
        for reply in (workers, now):
            if isinstance(reply, RedisCommandError):
                where = bus_liveness.where(cfg.redis_url, cfg.namespace)
                raise BusUnavailable(f"{reply} ({where})")
        alive = bus_liveness.alive_from_heartbeats(
            workers, cfg.dead_after_ms, bus_liveness.redis_ms(now)
        )
        if liveness is not None:
            liveness.store(alive)
    if not alive:
        raise BusUnavailable(
            bus_liveness.no_worker(bus_liveness.where(cfg.redis_url, cfg.namespace))
        )
    no_answer = bus_liveness.no_answer(budget_ms)
    request_id = ids.new_request_id()
    reply_key = keys.reply(cfg.namespace, request_id)
    left_ms = max(int((end - time.monotonic()) * 1000), 1)
    event = dict(event)
    event["deadline"] = ids.now_ms() + left_ms  # read by workers that predate budget_ms
    event["reply_to"] = reply_key
    event["request_id"] = request_id
    event["budget_ms"] = left_ms
    data = packb(event)
    if len(data) > cfg.max_event_bytes:
        raise BusUnavailable(_too_large(len(data), cfg))
    # Redis's own BLPOP timeout is past ours (whole seconds, >= 1): the client's deadline
    # decides, and the connection is dropped if it passes (a late pop must not be reused)
    try:
        replies = conn.pipeline(
            [
                (
                    "XADD",
                    keys.requests(cfg.namespace),
                    "*",  # no MAXLEN: the chain workers trim only what they took
                    keys.ENTRY_FIELD,
                    data,
                ),
                ("BLPOP", reply_key, int(left_ms / 1000) + 2),
            ],
            deadline=end,
            until_error=True,  # a refused XADD (OOM, MISCONF) is said at once
        )
    except RespTimeout as exc:
        raise BusUnavailable(no_answer) from exc
    for reply in replies:
        if isinstance(reply, RedisCommandError):
            raise BusUnavailable(f"Redis refused the request: {reply}")
    popped = replies[-1]
    if not isinstance(popped, list) or len(popped) != 2 or not isinstance(popped[1], bytes):
        raise BusUnavailable(no_answer)
    try:
        decision = unpackb(popped[1])
    except MsgpackError as exc:
        raise BusUnavailable(f"the reply could not be decoded: {exc}") from exc
    if not isinstance(decision, dict):
        raise BusUnavailable("the reply is not a decision")
    # workers that predate per-call request ids answer with the event's id
    if decision.get("request_id") not in (None, request_id, event["id"]):
        raise BusUnavailable("the reply belongs to another request")
    return decision


def budget_for(cfg: LeanConfig, route: Route, entry_timeout_s: float) -> int:
    """The request's deadline: the configured one, kept under the hook entry's timeout."""
    configured = cfg.deadline_ms(route.kind, route.name)
    ceiling = int(entry_timeout_s * 1000) - START_MARGIN_MS
    return max(1, min(configured, ceiling))


def supervise(
    event: dict[str, Any],
    data: Mapping[str, Any],
    environ: Mapping[str, str],
    conn: Connection,
    cfg: LeanConfig,
) -> dict[str, Any] | None:
    """The producer-side capture of supervised sessions (:mod:`hookbus.supervisor.capture`)
    for a session the agent registry manages: pane, context pressure and state hint go into the
    payload. Imported only inside tmux, so every other event pays nothing for it."""
    from hookbus.supervisor.capture import supervise_event

    def execute(*args: bytes | str | int | float) -> Any:
        return conn.call(*args, deadline=time.monotonic() + 2.0)

    return supervise_event(event, data, environ, execute, cfg.namespace)


def supervised_route(
    capture: Mapping[str, Any], budget_ms: int, entry_timeout_s: float
) -> tuple[str, int]:
    """A managed session's event: a blocking request when its supervisor answers (a
    bidirectional agent's Stop / PreCompact, with the supervisor's long deadline kept under
    the entry's timeout), else published so the wake goes the fan-out way and the agent
    never waits for its supervisor."""
    wanted = capture.get("reply_deadline_ms")
    if capture.get("reply_wanted") and isinstance(wanted, int):
        ceiling = int(entry_timeout_s * 1000) - START_MARGIN_MS
        return REQUEST, max(1, min(wanted, ceiling))
    return PUBLISH, budget_ms


def answer_event(
    harness: Adapter,
    data: Mapping[str, Any],
    *,
    environ: Mapping[str, str],
    entry_timeout_s: float = DEFAULT_ENTRY_TIMEOUT_S,
    cfg: LeanConfig | None = None,
    conn: Connection | None = None,
    liveness: Liveness | None = None,
) -> Output:
    """Everything after parsing: route, send, render. Never raises for bus trouble.

    A long-lived caller (the gateway) passes its configuration, a pooled connection and a
    liveness cache; the per-event command opens and closes its own connection.
    """
    started = time.monotonic()
    if harness.normalize is not None:
        data = harness.normalize(dict(data))
    name = data.get("hook_event_name")
    if not isinstance(name, str) or not name:
        return Output(stderr="hookbus: the hook input has no hook_event_name", exit_code=2)
    route = harness.route(name)
    if data.get("stop_hook_active") is True and route.kind in STOP_KINDS:
        return Output()  # the CLI's own loop guard: this Stop follows a Stop hook's block
    policy: str | None = None
    guards: FailPolicy | None = None
    try:
        if cfg is None:
            cfg = load(environ)
        policy = cfg.policy(route.kind, route.name)
        guards = FailPolicy(cfg.namespace, environ)
        event = build_event(harness, route, data, environ)
        own = conn is None
        link = connect(cfg.redis_url) if conn is None else conn
        try:
            mode, budget = route.mode, budget_for(cfg, route, entry_timeout_s)
            if "TMUX" in environ:  # only an agent inside tmux can be a supervised one
                supervised = supervise(event, data, environ, link, cfg)
                if supervised is not None:
                    mode, budget = supervised_route(supervised, budget, entry_timeout_s)
            if mode != REQUEST:
                publish(link, cfg, event)
                return Output()
            decision = guards.closed(
                route.kind, request(link, cfg, event, budget, liveness, guards)
            )
            if decision.get("approval"):  # parked for an operator? (loaded only then)
                from hookbus.harnesses.lean import parked

                if parked.is_parked(decision):  # an operator answers: wait as the entry allows
                    entry_end = started + entry_timeout_s - START_MARGIN_MS / 1000
                    decision = parked.wait_for_operator(
                        link,
                        cfg.namespace,
                        decision,
                        end=entry_end,
                        policy=fails_closed(policy, guards, route.kind),
                    )
        finally:
            if own:
                link.close()
    except BusUnavailable as exc:
        why = _placed(str(exc), cfg)
    except RedisUnavailable as exc:
        why = f"cannot reach Redis at {exc.url}: {exc.reason}"
        if cfg is not None:
            why += f" (namespace {cfg.namespace!r})"
    except HookBusError as exc:  # configuration errors, Redis refusing a command
        why = _placed(str(exc), cfg)
    except (MsgpackError, ValueError) as exc:
        why = f"bad event: {exc}"
    else:
        return harness.render(route, Answer(decision, event=data))
    answer = Answer(unavailable=why, policy=fails_closed(policy, guards, route.kind), event=data)
    return harness.render(route, answer)


def _placed(text: str, cfg: LeanConfig | None) -> str:
    """``text`` naming the Redis URL (masked) and namespace it is about, once; a
    configuration that could not be read has none to name."""
    if cfg is None:
        return text
    from hookbus.bus.policy.liveness import placed, where

    return placed(text, where(cfg.redis_url, cfg.namespace))


def parse_args(argv: Sequence[str]) -> float:
    """``[--timeout SECONDS]``: the hook entry's timeout, which the deadline stays under."""
    timeout = DEFAULT_ENTRY_TIMEOUT_S
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--timeout" and args:
            timeout = float(args.pop(0))
        elif arg.startswith("--timeout="):
            timeout = float(arg.partition("=")[2])
        else:
            raise ValueError(f"unknown argument {arg!r} (usage: hook [--timeout SECONDS])")
    return timeout


def run(
    cli: str,
    argv: Sequence[str],
    *,
    stdin: BinaryIO,
    stdout: TextIO,
    stderr: TextIO,
    environ: Mapping[str, str],
) -> int:
    """Read one event from ``stdin``, answer on ``stdout``; returns the exit code."""
    raw = stdin.read()
    try:
        entry_timeout_s = parse_args(argv)
        harness = adapter(cli)
    except (ValueError, KeyError) as exc:
        stderr.write(f"hookbus {cli} hook: {exc}\n")
        return EXIT_BAD_INPUT
    try:
        data = lean_json.loads(raw)
    except ValueError as exc:
        stderr.write(f"hookbus: the hook input is not JSON ({exc})\n")
        return EXIT_BAD_INPUT
    except RecursionError:
        output = unreadable(harness, raw, "the hook input is nested too deeply to read")
        stdout.write(lean_json.dumps(output.stdout) + "\n")
        stderr.write(output.stderr + "\n")
        return output.exit_code
    if not isinstance(data, dict):
        stderr.write("hookbus: the hook input is not a JSON object\n")
        return EXIT_BAD_INPUT
    if harness.normalize is not None:  # so that the fallback below finds the event too
        data = harness.normalize(data)
    try:
        output = answer_event(harness, data, environ=environ, entry_timeout_s=entry_timeout_s)
    except Exception as exc:  # a bug must not let a guarded call through: answer as "down"
        name = data.get("hook_event_name")
        route = harness.route(name if isinstance(name, str) else "")
        output = harness.render(route, Answer(unavailable=f"internal error: {exc!r}", event=data))
    if output.stdout is not None:
        # ASCII-only JSON: nothing a hook returns can make stdout undecodable
        stdout.write(lean_json.dumps(output.stdout))
        stdout.write("\n")
    if output.stderr:
        stderr.write(output.stderr + "\n")
    return output.exit_code


#: Where an event's name is looked for in input that cannot be parsed (compiled on that
#: path only: ``re`` is not imported for the events that parse).
_EVENT_NAME = rb'"hook_event_name"\s*:\s*"([A-Za-z]{1,64})"'
#: The event name of a CLI's own shape (Copilot's ``"hookName": "permissionRequest"``,
#: Cline's ``"hookName": "tool_call"``).
_HOOK_NAME = rb'"hookName"\s*:\s*"([A-Za-z_]{1,64})"'


def _event_name(harness: Adapter, raw: bytes) -> str | None:
    """The event an unparsable input names, in either shape (the CLI's own name as the
    adapter's ``normalize`` maps it), so that its fail-closed answer takes the event's own
    deny form: Copilot ignores ``decision: block`` on a PermissionRequest, Cline any answer
    without ``cancel`` or ``overrideInput``."""
    import re

    head = raw[:65536]
    found = re.search(_EVENT_NAME, head)
    if found is not None:
        return found.group(1).decode()
    found = re.search(_HOOK_NAME, head)
    if found is None or harness.normalize is None:  # only a row's normalize knows the shape
        return None
    named = harness.normalize({"hookName": found.group(1).decode()}).get("hook_event_name")
    return named if isinstance(named, str) else None


def unreadable(harness: Adapter, raw: bytes, why: str) -> Output:
    """The fail-closed answer (JSON, exit 0) to input the hook cannot parse (nested past
    the parser's depth): a request of the named event is denied as if the bus were down
    with policy deny; without a readable name, as the row's ``unnamed`` event, else a
    generic block."""
    name = _event_name(harness, raw) or harness.unnamed
    if name is not None:
        route = harness.route(name)
        if route.mode == REQUEST:
            output = harness.render(route, Answer(unavailable=why, policy="deny"))
            return Output(output.stdout, stderr=f"hookbus: {why}")
    reason = f"hookbus: {why}; blocked because hookbus hooks fail closed"
    return Output({"decision": "block", "reason": reason}, stderr=f"hookbus: {why}")


def main(
    cli: str,
    argv: Sequence[str],
    environ: Mapping[str, str] | None = None,
    *,
    exit_process: bool = False,
) -> int:
    """Answer one event of agent CLI ``cli`` on this process's stdin / stdout.

    ``exit_process``: the process exists for this one event (``hookbus <cli> hook``), so it
    ends here, once stdout and stderr are flushed, without the interpreter's teardown
    (freeing every module and object: about 2 ms of CPU, a sixth of such a process, paid on
    every tool call; the kernel reclaims the rest, the socket included)."""
    stdout = sys.stdout
    try:
        code = run(
            cli,
            argv,
            stdin=sys.stdin.buffer,
            stdout=stdout,
            stderr=sys.stderr,
            environ=os.environ if environ is None else environ,
        )
        stdout.flush()
    except BrokenPipeError:  # the CLI stopped reading: nothing useful is left to do
        code = 0
    if exit_process:
        try:
            sys.stderr.flush()
        finally:
            os._exit(code)
    return code


#: The root command's global options a lean handler receives, as the variables they set.
_GLOBAL_ENV = {"redis_url": "HOOKBUS_REDIS_URL", "namespace": "HOOKBUS_NAMESPACE"}


def lean_command(cli: str, args: list[str], options: Mapping[str, Any]) -> int | None:
    """``hookbus [globals] <cli> hook ...`` from the CLI's pre-dispatch table (before
    typer loads); ``None`` hands ``--help`` to the typer app."""
    if "--help" in args or "-h" in args:
        return None
    environ = dict(os.environ)
    for option, var in _GLOBAL_ENV.items():
        if options.get(option):
            environ[var] = str(options[option])
    if options.get("config"):
        environ["HOOKBUS_CONFIG"] = str(options["config"])
    return main(cli, args, environ, exit_process=True)
