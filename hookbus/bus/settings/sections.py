"""The sections of the configuration (``[streams]``, ``[workers]``, ``[rq]``, ``[reload]``,
``[security]``, ``[autonomy]``, ``[approvals]``, ``[unguarded]``) and the value types they
share, with their ranges.

Each section is a frozen msgspec Struct; numeric settings carry their range as
``msgspec.Meta`` so that ``msgspec.convert`` refuses a zero concurrency or a negative TTL with
the setting's path. The top-level :class:`~hookbus.bus.settings.schema.Settings`, which holds
these sections and the per-kind tables, is :mod:`hookbus.bus.settings.schema`.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from hookbus import defaults
from hookbus.bus.settings import table

Policy = Literal["allow", "deny"]
AutonomyLevel = Literal["readonly", "supervised", "full"]
Isolation = Literal["fork", "none"]

#: A count or size that must be at least 1 (a stream length, a byte limit, a delivery count).
Positive = Annotated[int, msgspec.Meta(ge=table.POSITIVE)]
#: A duration that may be 0 (keep nothing) but never negative.
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
#: Chains one chain worker runs at once: threads, so a small number.
Concurrency = Annotated[int, msgspec.Meta(ge=1, le=1024)]
#: A share of something, above 0 and at most all of it.
Share = Annotated[float, msgspec.Meta(gt=0, le=1)]
#: A duration in seconds, above 0.
Seconds = Annotated[float, msgspec.Meta(gt=0)]


class StreamSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Stream trimming (approximate MAXLEN) and the event size limit."""

    requests_maxlen: Positive = defaults.DEFAULT_REQUESTS_MAXLEN
    events_maxlen: Positive = defaults.DEFAULT_EVENTS_MAXLEN
    decisions_maxlen: Positive = defaults.DEFAULT_DECISIONS_MAXLEN
    #: Which answers chain workers write to the decision log: ``all`` (default; what
    #: ``hookbus tail`` and ``hookbus replay`` read), ``not_allow`` (denials, asks, halts,
    #: rewrites... and every degraded answer: one Redis command less per plain allow), or
    #: ``off`` (see docs/scaling.md).
    decision_log: Literal["all", "not_allow", "off"] = "all"
    max_event_bytes: Positive = defaults.DEFAULT_MAX_EVENT_BYTES
    reply_ttl_s: Positive = defaults.DEFAULT_REPLY_TTL_S


class WorkerSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Heartbeats, liveness and redelivery limits of the worker fleet."""

    heartbeat_interval_ms: Positive = defaults.DEFAULT_HEARTBEAT_INTERVAL_MS
    dead_after_ms: Positive = defaults.DEFAULT_WORKER_DEAD_AFTER_MS
    prune_after_ms: Positive = defaults.DEFAULT_WORKER_PRUNE_AFTER_MS
    max_deliveries: Positive = defaults.DEFAULT_MAX_DELIVERIES
    concurrency: Concurrency = 1
    #: Processes reading each partition (0: all of them). Bounded, Redis's cost per request
    #: stays flat as the fleet grows; add partitions to give more processes work.
    readers_per_partition: Annotated[int, msgspec.Meta(ge=0, le=64)] = (
        defaults.DEFAULT_READERS_PER_PARTITION
    )
    partition_lease_ms: Annotated[int, msgspec.Meta(ge=500, le=60_000)] = (
        defaults.DEFAULT_PARTITION_LEASE_MS
    )

    def __post_init__(self) -> None:
        problem = table.liveness_problem(self.dead_after_ms, self.heartbeat_interval_ms)
        if problem:
            raise ValueError(problem)


class RQSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """RQ, which may live on its own (non-cluster) Redis."""

    redis_url: str | None = None
    result_ttl_s: NonNegative = defaults.DEFAULT_RQ_RESULT_TTL_S
    isolation: Isolation = "none"
    #: Events of one hook a fan-out job takes from one read of the event log. Each event
    #: still runs alone: one that fails is retried and dead-lettered on its own.
    pack_max_events: Annotated[int, msgspec.Meta(ge=1, le=1000)] = (
        defaults.DEFAULT_RQ_PACK_MAX_EVENTS
    )


class ReloadSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Hook bundles and the single-host stamp file."""

    data_dir: str | None = None
    bundle_history: Positive = defaults.DEFAULT_BUNDLE_HISTORY
    max_bundle_bytes: Positive = defaults.DEFAULT_MAX_BUNDLE_BYTES


class SecuritySettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The hook audit's switches. ``skip_security_audit`` is an operator's choice."""

    skip_security_audit: bool = False
    allow_manifest_skip: bool = False
    http_allowlist: tuple[str, ...] = ()
    allow_private_http: bool = False
    max_file_bytes: Positive = 1024 * 1024
    env_allowlist: tuple[str, ...] = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")
    #: Variables an agent-written http hook's headers may name as ${NAME} (none by default).
    http_header_env: tuple[str, ...] = ()
    #: Run agent-written shell/python hooks even where they cannot be confined (no network,
    #: writes only in their folder); off: such a hook is refused and its on_error answers.
    allow_unconfined_agent_hooks: bool = False
    #: The user (name or uid, never root) a worker running as root runs agent-written hooks as.
    agent_hook_user: str = "nobody"
    #: Variables an agent's manifest ``env`` may set besides ``HOOK_*`` and the locale ones;
    #: loader and interpreter variables (``LD_*``, ``PYTHON*``, ``BASH_ENV``...) never.
    agent_env_allowlist: tuple[str, ...] = ()
    #: Resource limits of one sandboxed run of an agent's hook.
    agent_cpu_secs: Positive = defaults.DEFAULT_AGENT_CPU_S
    agent_memory_mb: Positive = defaults.DEFAULT_AGENT_MEMORY_MB
    agent_max_processes: Positive = defaults.DEFAULT_AGENT_MAX_PROCESSES
    agent_max_file_mb: Positive = defaults.DEFAULT_AGENT_MAX_FILE_MB
    #: The longest an agent's hook may run, and its share of a request's time budget.
    agent_timeout_secs: Seconds = 5.0
    agent_deadline_share: Share = 0.5


#: How long an operator may take on a parked request, in seconds.
ApprovalWait = Annotated[int, msgspec.Meta(ge=1, le=defaults.MAX_APPROVAL_WAIT_S)]


class ApprovalSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The approval inbox: where a hook's ``ask`` goes when its manifest does not say.

    ``route = "agent"`` (the default) answers ``ask`` to the agent as always; ``"operator"``
    parks the request until an operator decides (``hookbus approvals``, the console) or
    ``wait_s`` passes. ``notify_url`` gets a POST (Slack-compatible JSON) per parked request,
    through the same address checks as http hooks; ``console_url`` is the link it carries.
    ``max_pending_per_agent`` bounds what one agent may have waiting for an operator (per
    partition; 0: no bound): past it, its next ask is answered at once by the kind's policy,
    flagged degraded, so one agent cannot bury every other agent's asks.
    """

    route: Literal["agent", "operator"] = "agent"
    wait_s: ApprovalWait = defaults.DEFAULT_APPROVAL_WAIT_S
    notify_url: str | None = None
    console_url: str = "http://127.0.0.1:8788"
    keep_s: Positive = defaults.DEFAULT_APPROVAL_KEEP_S
    max_pending_per_agent: Annotated[int, msgspec.Meta(ge=0)] = (
        defaults.DEFAULT_MAX_PENDING_APPROVALS_PER_AGENT
    )


class NotifierSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One place a parked request is announced (``[notifiers.NAME]``, named by a hook's
    ``[approval] notify``): a generic JSON ``webhook`` (the approval's fields and the whole
    input) or a ``slack`` incoming webhook (a ``text`` with a link to the console)."""

    kind: Literal["webhook", "slack"] = "webhook"
    url: str = ""


class AutonomySettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What agents may do to hooks on their own: the autonomy policy."""

    level: AutonomyLevel = "supervised"
    allowed_commands: tuple[str, ...] = ()
    forbidden_paths: tuple[str, ...] = ("/etc", "/root", "~/.ssh", "~/.aws", "~/.gnupg")
    allow_hook_write: bool = True
    allow_shell_chaining: bool = False


class UnguardedSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the fleet does about a tool call that ran with no guard asked (its post event
    arrived, no guard decision did): always recorded and counted; with ``then = "notice"``
    the session's agent is also told (a warning notice, delivered once as added context);
    with ``"halt"`` every further tool call of that session is refused (a blocking notice)
    for ``for_s`` seconds or until an operator retracts it. A fleet setting, not a hook's:
    the reaction must hold when the hook set is what went wrong."""

    then: Literal["record", "notice", "halt"] = "record"
    for_s: Annotated[int, msgspec.Meta(ge=1, le=7 * 86_400)] = 1_800
