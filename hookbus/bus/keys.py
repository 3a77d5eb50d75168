"""Every Redis key and channel name hookbus uses, built by small pure functions.

All keys of a namespace share the hash tag ``{ns}`` so a namespace lives in one Redis
Cluster slot and multi-key commands stay legal. No other module builds key strings.
"""

from __future__ import annotations

PREFIX = "hookbus"
#: The characters a namespace may hold: it is spliced into every key's hash tag ``{ns}``,
#: so a brace, a colon or a space would move keys to other slots or split a partition's
#: tag. (A set, not a regex: this module is on the per-event hook's path, which loads no
#: ``re``.)
NAMESPACE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
#: Longest namespace, in characters.
NAMESPACE_MAX_CHARS = 64

#: Consumer group of the request stream, read by chain workers.
CHAIN_GROUP = "chain"
#: Consumer group of the event log stream, read by fan-out dispatchers.
FANOUT_GROUP = "fanout"
#: Consumer group of the decision log, read by the fan-out role's request observers: every
#: answered request reaches the non-blocking hooks that observe it from there.
OBSERVE_GROUP = "observe"
#: The field of a request or event stream entry that holds the msgpack event.
ENTRY_FIELD = b"e"


def check_namespace(ns: str) -> str:
    """``ns`` when it can name a namespace, else a ValueError that says what may."""
    if not 0 < len(ns) <= NAMESPACE_MAX_CHARS or not NAMESPACE_CHARS.issuperset(ns):
        raise ValueError(
            f"{ns!r} is not a valid namespace: use 1 to 64 letters, digits, '-', '_' or '.'"
        )
    return ns


def _base(ns: str) -> str:
    return f"{PREFIX}:{{{check_namespace(ns)}}}"


def partition_base(ns: str, partition: int) -> str:
    """The key prefix of one partition of a namespace's streams: its own hash slot
    ``{ns:p}``, except partition 0, which keeps the namespace's own ``{ns}`` (so one
    partition means today's key names)."""
    base = _base(ns)
    if partition == 0:
        return base
    if partition < 0:
        raise ValueError(f"invalid partition {partition}: partitions count from 0")
    return f"{PREFIX}:{{{ns}:{partition}}}"


def partition_of(session_id: str | None, partitions: int) -> int:
    """The partition of a session's requests and events: a stable hash of its id (CRC-32,
    the same in every process and language), so one session's events stay in order in one
    stream. Events without a session go to partition 0."""
    if partitions <= 1 or not session_id:
        return 0
    import zlib  # only with partitions: the per-event hook pays for it then

    return zlib.crc32(session_id.encode()) % partitions


def partition_events(ns: str, partition: int) -> str:
    """Partition ``partition``'s event stream (group ``fanout``): ``{ns:p}:events``, and
    for partition 0 the namespace's own :func:`events` (one partition: today's name)."""
    return f"{partition_base(ns, partition)}:events"


def partition_batch(ns: str, partition: int, hook_id: str) -> str:
    """A batching hook's buffer of the events of one partition, in that partition's slot
    (the script that acknowledges an event appends it: one slot per call); partition 0's
    is the namespace's :func:`batch`."""
    return f"{partition_base(ns, partition)}:batch:{hook_id}"


def partition_batch_lock(ns: str, partition: int, hook_id: str) -> str:
    """Lock of the one dispatcher flushing a partition's buffer of a batching hook;
    partition 0's is the namespace's :func:`batch_lock`."""
    return f"{partition_base(ns, partition)}:batch-lock:{hook_id}"


def requests(ns: str) -> str:
    """Stream of blocking requests (group ``chain``)."""
    return f"{_base(ns)}:req"


def reply(ns: str, request_id: str) -> str:
    """List a chain worker pushes one request's decision to (expires)."""
    return f"{_base(ns)}:rep:{request_id}"


def inbox(ns: str, producer_id: str) -> str:
    """Reply stream of one producer process (the async client's shared inbox)."""
    return f"{_base(ns)}:inbox:{producer_id}"


def events(ns: str) -> str:
    """Stream of every published event (group ``fanout``): the replayable log."""
    return f"{_base(ns)}:events"


def decisions(ns: str) -> str:
    """Stream logging every decision and every non-blocking hook run."""
    return f"{_base(ns)}:decisions"


def dead_letters(ns: str) -> str:
    """Stream of requests / events delivered too many times."""
    return f"{_base(ns)}:dead"


def bundle_stamp(ns: str) -> str:
    """String holding the current bundle version (the stamp)."""
    return f"{_base(ns)}:bundle"


def fail_policy(ns: str) -> str:
    """String holding the published failure policy of the current bundle (JSON: the kinds
    a guard fails closed), read by producers."""
    return f"{_base(ns)}:failpolicy"


def stream_aside(stream_key: str, at_ms: int) -> str:
    """Where a stream that can no longer be written is moved before it is recreated (same
    hash slot as ``stream_key``): its entries are drained from there."""
    return f"{stream_key}:aside:{at_ms}"


def bundle(ns: str, version: str) -> str:
    """Immutable bundle stored under its content-addressed version."""
    return f"{_base(ns)}:bundle:{version}"


def bundle_history(ns: str) -> str:
    """Sorted set / list of recent bundle versions for ``reload --list`` and rollback."""
    return f"{_base(ns)}:bundles"


def hook_history(ns: str) -> str:
    """Append-only, hash-chained stream of every change to the hook fleet (who, what, when)."""
    return f"{_base(ns)}:history"


def reload_channel(ns: str) -> str:
    """Pub/sub channel on which new bundle versions are announced."""
    return f"{_base(ns)}:reload"


def deaths_channel(ns: str) -> str:
    """Pub/sub channel on which a supervisor names a chain worker process it saw die, so
    live workers take its requests over at once."""
    return f"{_base(ns)}:deaths"


def workers(ns: str) -> str:
    """Hash of worker heartbeats: field = worker id, value = JSON heartbeat."""
    return f"{_base(ns)}:workers"


def worker_lease(ns: str, worker_id: str) -> str:
    """String that exists (with a short TTL, kept fresh by the worker) while a chain worker is
    alive: pending requests of a consumer without one may be taken over."""
    return f"{_base(ns)}:lease:{worker_id}"


def batch(ns: str, hook_id: str) -> str:
    """List buffering a batching hook's events until the batch is due."""
    return f"{_base(ns)}:batch:{hook_id}"


def batch_lock(ns: str, hook_id: str) -> str:
    """Lock held by the one fan-out dispatcher flushing a batching hook's buffer."""
    return f"{_base(ns)}:batch-lock:{hook_id}"


def dispatched(ns: str, marker_id: str) -> str:
    """Marker (on the RQ Redis) that the fan-out enqueued an event's or a batch's jobs."""
    return f"{_base(ns)}:dispatched:{marker_id}"


def pack_log(ns: str, job_id: str) -> str:
    """Hash (on the RQ Redis) of a fan-out pack job's progress: each event's outcome, written
    before the next event runs, so a pack whose worker died resumes where it stopped."""
    return f"{_base(ns)}:pack-log:{job_id}"


def agents(ns: str) -> str:
    """Hash of the agent registry of supervised sessions: field = agent id, value = the
    agent's JSON."""
    return f"{_base(ns)}:agents"


def agent_sessions(ns: str) -> str:
    """Hash indexing the agent registry by tmux session name: field = session, value = id."""
    return f"{_base(ns)}:agents:sessions"


def agents_global(ns: str) -> str:
    """String holding the agent registry's global part (global ``hook_settings``...) as JSON."""
    return f"{_base(ns)}:agents:global"


def approval_id(request_id: str, partition: int) -> str:
    """The id operators type for a parked request: 12 hex digits of its request id (random
    bits), with ``.p<N>`` for partitions above 0 so the id alone says where its keys are."""
    short = request_id[:12]
    return short if partition == 0 else f"{short}.p{partition}"


def approval_partition(approval: str) -> int:
    """The partition an approval id names (see :func:`approval_id`); ValueError when the
    text is not an approval id."""
    short, dot, tail = approval.partition(".p")
    if len(short) != 12 or any(c not in "0123456789abcdef" for c in short):
        raise ValueError(f"{approval!r} is not an approval id (12 hex digits, maybe .p<N>)")
    if not dot:
        return 0
    if not tail.isdigit() or tail.startswith("0"):
        raise ValueError(f"{approval!r} is not an approval id (partition after .p)")
    return int(tail)


def approval_item(ns: str, approval: str) -> str:
    """Hash of one parked request (who asked, what, until when, and once decided who and
    when), in its partition's slot beside the reply key it answers."""
    return f"{partition_base(ns, approval_partition(approval))}:approval:{approval}"


def approvals_pending(ns: str, partition: int) -> str:
    """Sorted set of a partition's parked requests waiting for an operator, by expiry (ms)."""
    return f"{partition_base(ns, partition)}:approvals:pending"


def approvals_done(ns: str, partition: int) -> str:
    """Sorted set of a partition's decided or expired approvals, by when (ms): the recent
    ones the console and ``approvals list`` show (bounded)."""
    return f"{partition_base(ns, partition)}:approvals:done"


def approvals_of_agent(ns: str, partition: int, agent: str) -> str:
    """Sorted set of one agent's parked requests in a partition, by expiry (ms): what its
    cap on pending approvals (``approvals.max_pending_per_agent``) counts."""
    return f"{partition_base(ns, partition)}:approvals:agent:{agent}"


def approvals_log(ns: str, partition: int) -> str:
    """Stream announcing each approval parked, decided or expired in a partition (what the
    console's live view and ``approvals list --watch`` follow)."""
    return f"{partition_base(ns, partition)}:approvals:log"


def trimmed_undelivered(stream_key: str) -> str:
    """Counter of the entries of a request or event stream that were trimmed before its
    consumer group read them (by a producer's XADD MAXLEN), in the stream's slot."""
    return f"{stream_key}:lost"


def rq_queue_name(ns: str) -> str:
    """Name of the RQ queue of a namespace (RQ adds its own ``rq:queue:`` prefix)."""
    return f"hookbus-{ns}"


def namespace_pattern(ns: str) -> str:
    """SCAN pattern matching every key of a namespace (tests clean up with it)."""
    return f"{_base(ns)}:*"


def partitions_pattern(ns: str) -> str:
    """SCAN pattern matching the keys of a namespace's partitions 1.. (``{ns:p}``)."""
    _base(ns)
    return f"{PREFIX}:{{{ns}:*}}:*"


class Keys:
    """The keys of one namespace, computed once: hot paths read attributes, not f-strings.

    A frozen plain class rather than a dataclass: this module is on the per-event path of
    the agent-CLI adapters (``hookbus claude-code hook``), where ``import dataclasses``
    alone would cost a large share of the process start (docs/performance.md).
    """

    __slots__ = _FIELDS = (
        "ns",
        "requests",
        "events",
        "decisions",
        "dead_letters",
        "bundle_stamp",
        "bundle_history",
        "reload_channel",
        "workers",
        "rq_queue",
        "partition",
        "base",
    )
    ns: str
    requests: str
    events: str
    decisions: str
    dead_letters: str
    bundle_stamp: str
    bundle_history: str
    reload_channel: str
    workers: str
    rq_queue: str
    #: Which partition's streams these are (0: the namespace's own, today's names).
    partition: int
    #: Prefix of this partition's per-request keys (reply lists, inboxes).
    base: str

    def __init__(
        self,
        *,
        ns: str,
        requests: str,
        events: str,
        decisions: str,
        dead_letters: str,
        bundle_stamp: str,
        bundle_history: str,
        reload_channel: str,
        workers: str,
        rq_queue: str,
        partition: int = 0,
        base: str | None = None,
    ) -> None:
        values = (
            *(ns, requests, events, decisions, dead_letters),
            *(bundle_stamp, bundle_history, reload_channel, workers, rq_queue),
            partition,
            base if base is not None else _base(ns),
        )
        for name, value in zip(self._FIELDS, values, strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Keys is frozen: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Keys is frozen: cannot delete {name!r}")

    def _values(self) -> tuple[str, ...]:
        return tuple(getattr(self, name) for name in self._FIELDS)

    def __eq__(self, other: object) -> bool:
        if type(other) is not Keys:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return f"Keys(ns={self.ns!r})"

    @classmethod
    def for_namespace(cls, ns: str) -> Keys:
        return cls(
            ns=ns,
            requests=requests(ns),
            events=events(ns),
            decisions=decisions(ns),
            dead_letters=dead_letters(ns),
            bundle_stamp=bundle_stamp(ns),
            bundle_history=bundle_history(ns),
            reload_channel=reload_channel(ns),
            workers=workers(ns),
            rq_queue=rq_queue_name(ns),
        )

    @classmethod
    def for_partition(cls, ns: str, partition: int) -> Keys:
        """The keys of one partition: its request, event, decision-log and dead-letter
        streams and its reply keys share the partition's hash slot (a reply script touches
        only that slot); heartbeats, bundles, reload and the RQ queue stay the namespace's.
        Partition 0 is exactly :meth:`for_namespace`."""
        if partition == 0:
            return cls.for_namespace(ns)
        base = partition_base(ns, partition)
        return cls(
            ns=ns,
            requests=f"{base}:req",
            events=f"{base}:events",
            decisions=f"{base}:decisions",
            dead_letters=f"{base}:dead",
            bundle_stamp=bundle_stamp(ns),
            bundle_history=bundle_history(ns),
            reload_channel=reload_channel(ns),
            workers=workers(ns),
            rq_queue=rq_queue_name(ns),
            partition=partition,
            base=base,
        )

    def reply(self, request_id: str) -> str:
        return f"{self.base}:rep:{request_id}"

    def inbox(self, producer_id: str) -> str:
        return f"{self.base}:inbox:{producer_id}"

    def bundle(self, version: str) -> str:
        return bundle(self.ns, version)

    def batch(self, hook_id: str) -> str:
        return batch(self.ns, hook_id)

    def guarded_calls(self) -> str:
        """Sorted set of the tool calls a guard was asked about (member: the call's name,
        score: when, ms), in this partition's slot, beside its event stream."""
        return f"{self.base}:guarded"

    def unguarded_calls(self) -> str:
        """Stream of the tool calls that ran with no guard asked, newest last (capped)."""
        return f"{self.base}:unguarded"

    def unguarded_counts(self) -> str:
        """Hash of unguarded calls counted per agent and CLI, since the key was made."""
        return f"{self.base}:unguarded:n"


def _state_base(ns: str, state_id: str) -> str:
    """The prefix of one piece of fleet-wide state, in a hash slot of its own: the tag holds
    a CRC-32 of the state's id, so on a cluster the counters and locks of a busy fleet spread
    over every master instead of crowding the namespace's slot."""
    import zlib  # not at import: the per-event hook uses no state key

    _base(ns)  # validates the namespace
    return f"{PREFIX}:{{{ns}~s{zlib.crc32(state_id.encode()):08x}}}"


def state(ns: str, state_id: str) -> str:
    """One piece of fleet-wide state (a limit's window, a lock, an escalation counter) by its
    id (``limit:<hook>:<key>``, ``lock:<key>``, ``escalate:<hook>:<session>``)."""
    return f"{_state_base(ns, state_id)}:state:{state_id}"


def state_pattern(ns: str) -> str:
    """A SCAN pattern matching every piece of fleet-wide state of a namespace, on each master."""
    _base(ns)
    return f"{PREFIX}:{{{ns}~s*}}:state:*"


def state_id_of(ns: str, key: str) -> str | None:
    """The state id inside a key built by :func:`state` (None for any other key)."""
    head = f"{PREFIX}:{{{ns}~s"
    if not key.startswith(head):
        return None
    rest = key[len(head) :]
    marker = "}:state:"
    at = rest.find(marker)
    return None if at != 8 else rest[at + len(marker) :]


def notices(ns: str) -> str:
    """Hash of the namespace's notices: notice id -> the notice (JSON)."""
    return f"{_base(ns)}:notices"


def notices_version(ns: str) -> str:
    """Counter bumped by every change to the notices, so workers reload them only then."""
    return f"{_base(ns)}:notices:v"


def notice_seen(ns: str, notice_id: str) -> str:
    """Set of the sessions a notice has reached (each gets it once); expires with it."""
    return f"{_base(ns)}:notice-seen:{notice_id}"


def partition_reader(ns: str, partition: int, slot: int) -> str:
    """One of a partition's reader slots: the chain worker process holding it (a leased
    value) reads that partition's request stream. In the namespace's own slot, so one MGET
    shows every partition's readers."""
    return f"{_base(ns)}:readers:{partition}:{slot}"


def chain_members(ns: str) -> str:
    """Sorted set of the live chain worker processes (score: Redis ms of their last round),
    from which each process computes its fair share of reader slots."""
    return f"{_base(ns)}:chain-members"
