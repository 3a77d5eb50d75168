"""The one exception tree of hookbus.

Every error a user can meet derives from :class:`HookBusError`, carries the object that
failed, and says in its message what to do about it. A control-flow signal, should one be
needed, derives from ``BaseException`` instead, so that ``except Exception`` inside a hook
cannot swallow it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


class HookBusError(Exception):
    """Base of every error hookbus raises on purpose."""


# --- wire and catalogue -------------------------------------------------------------


class WireError(HookBusError):
    """A message could not be decoded: a field is missing, mistyped or the bytes are not
    msgpack/JSON. ``field`` is the path of the failing field (``$.payload.x``) when known."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class EventTooLarge(HookBusError):
    """An event encodes to more bytes than ``max_event_bytes``; nothing was sent."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"event is {size} bytes, over the limit of {limit} bytes; nothing was sent "
            "(shrink the payload, or raise streams.max_event_bytes in hookbus.toml)"
        )
        self.size = size
        self.limit = limit


class InvalidPayload(HookBusError):
    """An event's payload (or meta) is not a JSON object hookbus can carry: not a dict,
    nested too deep, too many keys, or a value msgpack cannot encode. Nothing was sent."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(
            f"invalid event {field}: {problem}; nothing was sent (send a JSON object of "
            "strings, numbers, booleans, null, arrays and objects)"
        )
        self.field = field
        self.problem = problem


class UnknownEventKind(HookBusError):
    """An event kind that is neither canonical, an alias, a Claude Code event name nor a
    kind declared in config."""

    def __init__(self, kind: str, known: Iterable[str]) -> None:
        import difflib  # only on this error path: the per-event hook never pays for it

        names = sorted(set(known))
        folded = {name.lower(): name for name in names}
        close = difflib.get_close_matches(kind.lower(), list(folded), n=1, cutoff=0.6)
        hint = f"did you mean {folded[close[0]]!r}? " if close else ""
        super().__init__(
            f"unknown event kind {kind!r}; {hint}known kinds: {', '.join(names)} "
            "(declare custom kinds under custom_kinds in hookbus.toml)"
        )
        self.kind = kind
        self.known = tuple(names)
        self.suggestion = folded[close[0]] if close else None


class KindCannotBlock(HookBusError):
    """A producer asked for a blocking request on a kind that may never block."""

    def __init__(self, kind: str) -> None:
        super().__init__(
            f"event kind {kind!r} is observe-only and cannot be sent as a blocking request; "
            "publish it instead"
        )
        self.kind = kind


# --- configuration ------------------------------------------------------------------


class ConfigError(HookBusError):
    """The configuration (hookbus.toml, HOOKBUS_* variables or flags) is invalid."""


class StoppedDevError(ConfigError):
    """The ``hookbus dev`` this shell's commands used has stopped and nothing else names a
    Redis: falling through to the default one could hand the guards to a fleet nobody
    chose. Commands that never reach Redis (``hooks validate``, ``hooks create``) go on."""


# --- Redis --------------------------------------------------------------------------


class RedisUnavailable(HookBusError):
    """Redis could not be reached, or the connection broke, after the retry policy.

    ``url`` is printed as given: callers pass it with its password masked. ``namespace``,
    when the caller has one, is named too: a user talking to the wrong Redis or namespace
    sees where the call looked."""

    def __init__(self, url: str, reason: str, *, namespace: str | None = None) -> None:
        where = f" (namespace {namespace!r})" if namespace else ""
        super().__init__(
            f"cannot reach Redis at {url}{where}: {reason} "
            "(start one with `hookbus dev`, or set HOOKBUS_REDIS_URL)"
        )
        self.url = url
        self.reason = reason
        self.namespace = namespace


class PackProgressLost(HookBusError):
    """A fan-out pack could not write an event's outcome to its progress log (Redis away or
    refusing writes for longer than the retry policy): the pack stops before its next event,
    so no outcome is lost; RQ keeps the pack job and a rerun resumes after the last one
    written."""

    def __init__(self, pack: str, index: int, reason: str) -> None:
        super().__init__(
            f"pack {pack}: the outcome of its event {index} could not be recorded ({reason}); "
            "the pack stopped there and resumes from it when RQ runs it again "
            "(check that the RQ Redis accepts writes: `hookbus status`)"
        )
        self.pack = pack
        self.index = index
        self.reason = reason


class RedisCommandError(HookBusError):
    """Redis answered a command with an error (wrong type, ACL denial, unknown command...)."""


class RedisWritesRefused(RedisCommandError):
    """Redis refuses every write for now: ``refusal`` is ``OOM`` (maxmemory reached under
    noeviction), ``MISCONF`` (its last RDB save failed: a full or broken disk) or
    ``READONLY`` (a replica). Nothing can be sent or answered until the operator fixes it."""

    def __init__(self, url: str, refusal: str, detail: str) -> None:
        self.url = url
        self.refusal = refusal
        self.detail = detail
        super().__init__(f"Redis at {url} refuses writes: {detail}")


class StreamBacklogFull(HookBusError):
    """A request or event stream holds its limit of entries no consumer has taken yet
    (``streams.requests_maxlen`` / ``streams.events_maxlen``): nothing more is added until
    it drains, because adding would mean trimming entries nobody has read."""

    def __init__(self, message: str, *, key: str) -> None:
        self.key = key
        super().__init__(message)


class EmbeddedServerError(HookBusError):
    """The embedded Redis-compatible server could not be found or started."""


# --- hooks --------------------------------------------------------------------------


class ManifestError(HookBusError):
    """A hook manifest is invalid. ``path`` is the file, ``field`` the dotted field."""

    def __init__(self, path: str, field: str | None, reason: str) -> None:
        where = f"{path}: {field}" if field else path
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.field = field
        self.reason = reason


class HookRegistrationError(HookBusError):
    """A hook was rejected at registration (unknown kind, bad priority, wrong signature)."""

    def __init__(self, hook_id: str, reason: str) -> None:
        super().__init__(f"hook {hook_id!r}: {reason}")
        self.hook_id = hook_id
        self.reason = reason


class HookNotFound(HookBusError):
    """A command named a hook that is not in the hooks folder or registry."""

    def __init__(self, name: str, where: str) -> None:
        super().__init__(f"no hook named {name!r} in {where} (see `hookbus hooks list`)")
        self.name = name


class HookExists(HookBusError):
    """``hookbus hooks create`` refuses to overwrite an existing hook folder or file."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path} already exists; choose another name or delete it first")
        self.path = path


class PendingHookChanged(HookBusError):
    """An approval names the copy of a pending hook the operator read (its sha256), and the
    pending copy is another one now: approving by name would sign code nobody read."""

    def __init__(self, name: str, shown: str, now: str) -> None:
        super().__init__(
            f"the pending hook {name!r} is not the copy you read (you read sha256 "
            f"{shown[:12]}, it is {now[:12]} now): nothing was approved; read it again "
            "(`hookbus hooks pending`, or the console's Hooks page) and approve that copy"
        )
        self.name = name
        self.shown = shown
        self.now = now


class ApprovalUnconfirmed(HookBusError):
    """An approval that names no copy of a pending hook (no ``--digest``), with nobody at a
    terminal to be shown one and confirm it."""


class HookExecutionError(HookBusError):
    """A hook's action failed: bad exit code, garbage output, HTTP error, import error."""

    def __init__(self, hook_id: str, reason: str) -> None:
        super().__init__(f"hook {hook_id!r} failed: {reason}")
        self.hook_id = hook_id
        self.reason = reason


class HookTimeout(HookExecutionError):
    """A hook's action did not finish within min(its timeout, the request's time left)."""


class HookBusy(HookTimeout):
    """A hook was not started: as many of its calls as its concurrency cap allows are still
    running (abandoned after their timeout, most likely). Counted as a timeout, since the
    request could not get an answer from the hook in time either way."""


class SecurityViolation(HookBusError):
    """The audit or the autonomy policy refused a hook; ``findings`` say why."""

    def __init__(self, message: str, findings: Iterable[object] = ()) -> None:
        super().__init__(message)
        self.findings = tuple(findings)


class FailsOpenInstall(HookBusError):
    """An agent CLI whose version would let every guarded call run whenever hookbus cannot
    start (it predates the hook entries' fail-closed setting): installing is refused."""

    def __init__(self, label: str, binary: str, version: str, since: str) -> None:
        #: what goes wrong, without the advice (the warning ``--force`` prints)
        self.risk = (
            f"{label} {version} ({binary}) ignores onFailure, which came in {since}: with "
            "hookbus installed, every guarded call would run whenever hookbus cannot start"
        )
        super().__init__(
            f"{self.risk}. Upgrade {label} to {since} or later, or install anyway with --force"
        )
        self.label = label
        self.version = version


# --- bus ----------------------------------------------------------------------------


class RequestTimeout(HookBusError):
    """A strict request got no decision before its deadline (non-strict requests return the
    failure policy's decision instead of raising)."""


class NoWorkerAlive(HookBusError):
    """A strict request found no live chain worker (non-strict requests apply the policy)."""


class BundleError(HookBusError):
    """A hook bundle could not be built, stored, fetched or verified."""


class JobNotFound(HookBusError):
    """A dead-letter command named a job id that is not in the failed registry."""


# --- supervised sessions ---------------------------------------------------------------


class AgentRegistryError(HookBusError):
    """The agent registry refused a change: an unknown key, a bad value, a duplicate tmux
    session or a malformed registry file. ``key`` names the offending key when there is
    one; nothing was changed."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class AgentNotFound(HookBusError):
    """A command named an agent id that is not in the agent registry."""

    def __init__(self, agent_id: str) -> None:
        super().__init__(
            f"no agent {agent_id!r} in the agent registry (see `hookbus agents list`; "
            "create it with `hookbus agents set ID tmux_session_name=NAME`)"
        )
        self.agent_id = agent_id


class TmuxError(HookBusError):
    """A tmux command failed: no such session, no tmux server, or tmux is not installed."""


class ToolDenied(HookBusError):
    """A guarded tool call was not allowed: the fleet answered deny, ask or halt.

    Raised by :meth:`AgentSession.guarded` before the tool runs; ``decision`` is the whole
    answer (its ``reason`` is what to tell the model, ``degraded`` says a policy decided).
    """

    def __init__(self, tool: str, decision: Any) -> None:
        reason = getattr(decision, "reason", None) or "no reason given"
        outcome = getattr(decision, "outcome", "deny")
        super().__init__(f"{tool}: {outcome} ({reason})")
        self.tool = tool
        self.decision = decision


class FleetStateError(HookBusError):
    """Fleet-wide state (a limit, a lock, an escalation counter, a notice) could not be read
    or changed: Redis refused or did not answer in the time the request had left.

    Inside a hook this is the hook's failure, so its ``on_error`` decides; a limit or a lock
    that cannot be checked never turns into a silent allow.
    """

    def __init__(self, state_id: str, reason: str) -> None:
        self.state_id = state_id
        self.reason = reason
        super().__init__(f"fleet state {state_id!r}: {reason}")


class NoticeNotFound(HookBusError):
    """``hookbus notices retract ID`` named a notice that does not exist (or expired)."""

    def __init__(self, notice_id: str) -> None:
        self.notice_id = notice_id
        super().__init__(f"no notice {notice_id!r}: `hookbus notices list` shows the live ones")


# --- the approval inbox ---------------------------------------------------------------


class ApprovalNotFound(HookBusError):
    """An approval id that names no parked request (mistyped, or decided so long ago that
    it was forgotten: see ``approvals.keep_s``)."""

    def __init__(self, approval: str) -> None:
        super().__init__(
            f"no approval {approval!r} in this namespace (see `hookbus approvals list`)"
        )
        self.approval = approval


class ApprovalRefused(HookBusError):
    """An operator's answer its approval's rules do not take: the operator allowed it once
    already (it needs others), or is not among those who may answer it."""

    def __init__(self, approval: str, reason: str) -> None:
        super().__init__(f"approval {approval}: {reason}; nothing changed")
        self.approval = approval
        self.reason = reason


class ApprovalClosed(HookBusError):
    """A second decision on a parked request: it was decided already, or expired. Names
    who decided first and when, so the operator knows whose word stands."""

    def __init__(self, approval: str, state: str, by: str | None, at_ms: int | None) -> None:
        if state == "expired":
            text = f"approval {approval} expired before anyone decided (its policy answered)"
        else:
            who = by or "someone"
            text = f"approval {approval} was already {state} by {who}"
        if at_ms:
            import time

            text += time.strftime(" at %Y-%m-%d %H:%M:%S UTC", time.gmtime(at_ms / 1000))
        super().__init__(text)
        self.approval = approval
        self.state = state
        self.decided_by = by
        self.at_ms = at_ms


# --- agent SDK integrations ---------------------------------------------------------


class MissingExtra(HookBusError, ImportError):
    """An agent SDK integration was imported without its SDK. ``package`` is the SDK's
    PyPI name, ``extra`` the hookbus extra that installs it. Also an ImportError, so code
    that tries an optional import catches it as it would the SDK's own."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(f"the {package} package is not installed: pip install 'hookbus[{extra}]'")
        self.package = package
        self.extra = extra
