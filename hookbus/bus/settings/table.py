"""The settings every process can read without the schema: names, variables, defaults and
ranges, in one table.

The schema (:mod:`hookbus.bus.settings.schema`, msgspec) takes its ranges, the file and
variable names and the kind-name rule from here; the per-event agent-CLI hook reads the
settings listed in :data:`LEAN_FIELDS` and :data:`LEAN_TABLES` with this table alone (its
process must not load msgspec). A property test holds the two readers to the same answers
for random files and environments. Standard library only.
"""

from __future__ import annotations

from hookbus import defaults

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    from collections.abc import Callable

#: The configuration file's name, and the variable naming it outright.
CONFIG_FILENAME = "hookbus.toml"
CONFIG_ENV = "HOOKBUS_CONFIG"
#: Every setting's variable starts so; ``__`` separates a section from its field.
ENV_PREFIX = "HOOKBUS_"

#: Smallest value of a count, size or duration that must be positive.
POSITIVE = 1
#: Streams per namespace (``partitions``), inclusive.
PARTITIONS_MIN = 1
PARTITIONS_MAX = 1024
#: What a request decides when no answer comes in time.
POLICIES = ("allow", "deny")


def env_var(path: str) -> str:
    """The variable of a dotted setting: ``streams.events_maxlen`` ->
    ``HOOKBUS_STREAMS__EVENTS_MAXLEN``; a per-kind table key keeps its spelling."""
    section, dot, name = path.partition(".")
    if not dot:
        return f"{ENV_PREFIX}{section.upper()}"
    if section in LEAN_TABLES:
        return f"{ENV_PREFIX}{section.upper()}__{name}"
    return f"{ENV_PREFIX}{section.upper()}__{name.upper()}"


def normalise(name: str) -> str:
    """The lookup key of an event kind name: lower case, without ``_``, ``-`` or spaces."""
    return name.replace("_", "").replace("-", "").replace(" ", "").lower()


#: The catalogue's other names of the built-in kinds, normalised, and the kind each names,
#: normalised: the lean path matches per-kind settings as the schema does without loading
#: the catalogue (a test holds this copy to :data:`hookbus.bus.kinds.DEFAULT_CATALOGUE`).
KIND_ALIASES = {
    "onsessionstart": "sessionstart",
    "userpromptsubmit": "promptsubmit",
    "beforepromptbuild": "promptsubmit",
    "onllmoutput": "llmoutput",
    "modeloutput": "llmoutput",
    "preabilitycall": "pretooluse",
    "beforetoolcall": "pretooluse",
    "postabilitycall": "posttooluse",
    "aftertoolcall": "posttooluse",
    "onaftertoolcall": "posttooluse",
    "responsecomplete": "stop",
    "sessionstop": "sessionend",
    "onsessionend": "sessionend",
    "sessionterminated": "sessionend",
}


def kind_key(name: str) -> str:
    """The key a per-kind table entry is matched by: its kind's normalised name."""
    key = normalise(name)
    return KIND_ALIASES.get(key, key)


# --- the checks both readers make, worded once ----------------------------------------


def partitions_problem(partitions: int) -> str | None:
    if not PARTITIONS_MIN <= partitions <= PARTITIONS_MAX:
        return f"partitions: must be {PARTITIONS_MIN} to {PARTITIONS_MAX}, got {partitions}"
    return None


def deadline_problem(kind: str, ms: int) -> str | None:
    if ms < POSITIVE:
        return f"deadlines.{kind}: must be > 0 ms, got {ms}"
    return None


def liveness_problem(dead_after_ms: int, heartbeat_interval_ms: int) -> str | None:
    # a worker declared dead between two of its own heartbeats would flap dead/alive
    if dead_after_ms <= heartbeat_interval_ms:
        return (
            f"workers.dead_after_ms: must be more than workers.heartbeat_interval_ms "
            f"({heartbeat_interval_ms}), got {dead_after_ms}"
        )
    return None


def namespace_problem(namespace: str) -> str | None:
    """What is wrong with a namespace (None: nothing), the same rule as the key builder's."""
    from hookbus.bus.keys import check_namespace

    try:
        check_namespace(namespace)
    except ValueError as exc:
        return f"namespace: {exc}"
    return None


class Field:
    """One setting: its dotted path, default, and for a whole number its range."""

    __slots__ = ("check", "default", "high", "low", "path")

    def __init__(
        self,
        path: str,
        default: object,
        low: int | None = None,
        high: int | None = None,
        check: Callable[[int], str | None] | None = None,
    ) -> None:
        self.path = path
        self.default = default
        self.low = low
        self.high = high
        #: the schema's own check of this setting, when it words one
        self.check = check

    def problem(self, value: int) -> str | None:
        """What is wrong with ``value``, worded as the schema words it; None when fine."""
        if self.check is not None:
            return self.check(value)
        if self.low is not None and value < self.low:
            return f"{self.path}: expected an integer >= {self.low}, got {value}"
        if self.high is not None and value > self.high:
            return f"{self.path}: expected an integer <= {self.high}, got {value}"
        return None

    @property
    def is_int(self) -> bool:
        return self.low is not None

    @property
    def env(self) -> str:
        return env_var(self.path)


#: The settings the per-event hook reads (a ``None`` default: not configured).
LEAN_FIELDS = (
    Field("redis_url", None),
    Field("namespace", defaults.DEFAULT_NAMESPACE),
    Field("partitions", 1, PARTITIONS_MIN, PARTITIONS_MAX, check=partitions_problem),
    Field("streams.requests_maxlen", defaults.DEFAULT_REQUESTS_MAXLEN, POSITIVE),
    Field("streams.events_maxlen", defaults.DEFAULT_EVENTS_MAXLEN, POSITIVE),
    Field("streams.max_event_bytes", defaults.DEFAULT_MAX_EVENT_BYTES, POSITIVE),
    Field("workers.heartbeat_interval_ms", defaults.DEFAULT_HEARTBEAT_INTERVAL_MS, POSITIVE),
    Field("workers.dead_after_ms", defaults.DEFAULT_WORKER_DEAD_AFTER_MS, POSITIVE),
)
#: The per-kind tables it reads: deadlines (ms, at least :data:`POSITIVE`) and policies.
LEAN_TABLES = ("deadlines", "on_timeout")
