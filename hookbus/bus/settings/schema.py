"""The configuration schema: a tree of frozen msgspec Structs with their ranges.

Loading (defaults < ``hookbus.toml`` < ``HOOKBUS_*`` < flags) lives in
:mod:`hookbus.bus.settings.loader`; this module only says what a valid configuration is. Numeric
settings carry their range as ``msgspec.Meta`` so that ``msgspec.convert`` refuses a zero
concurrency or a negative TTL with the setting's path, and the loader can name the variable
or file it came from. The sections and the value types they share are
:mod:`hookbus.bus.settings.sections`.
"""

from __future__ import annotations

import functools
from typing import Literal

import msgspec

from hookbus import defaults
from hookbus.bus.kinds import DEFAULT_CATALOGUE, Catalogue
from hookbus.bus.policy.failure import unanswered
from hookbus.bus.settings import table
from hookbus.bus.settings.sections import (
    ApprovalSettings,
    AutonomySettings,
    NotifierSettings,
    Policy,
    ReloadSettings,
    RQSettings,
    SecuritySettings,
    StreamSettings,
    UnguardedSettings,
    WorkerSettings,
)
from hookbus.bus.settings.table import normalise


class Settings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The effective configuration. Build it with :func:`~hookbus.bus.settings.load_settings`."""

    redis_url: str | None = None
    namespace: str = defaults.DEFAULT_NAMESPACE
    #: Request and event streams per namespace, each in its own Redis Cluster hash slot
    #: (``HOOKBUS_PARTITIONS``; 1 keeps today's key names; see docs/scaling.md).
    partitions: int = 1
    hooks_dir: str = defaults.DEFAULT_HOOKS_DIR
    deadlines: dict[str, int] = msgspec.field(default_factory=dict)
    on_timeout: dict[str, Policy] = msgspec.field(default_factory=dict)
    custom_kinds: dict[str, bool] = msgspec.field(default_factory=dict)
    log_level: str = "WARNING"
    #: ``text`` lines for people, or ``json``: one JSON object per line for log shippers.
    log_format: Literal["text", "json"] = "text"
    streams: StreamSettings = msgspec.field(default_factory=StreamSettings)
    workers: WorkerSettings = msgspec.field(default_factory=WorkerSettings)
    rq: RQSettings = msgspec.field(default_factory=RQSettings)
    reload: ReloadSettings = msgspec.field(default_factory=ReloadSettings)
    security: SecuritySettings = msgspec.field(default_factory=SecuritySettings)
    autonomy: AutonomySettings = msgspec.field(default_factory=AutonomySettings)
    approvals: ApprovalSettings = msgspec.field(default_factory=ApprovalSettings)
    unguarded: UnguardedSettings = msgspec.field(default_factory=UnguardedSettings)
    #: Where parked requests are announced, by name (see :class:`NotifierSettings`).
    notifiers: dict[str, NotifierSettings] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        problem = table.namespace_problem(self.namespace) or table.partitions_problem(
            self.partitions
        )
        for kind, ms in self.deadlines.items():
            problem = problem or table.deadline_problem(kind, ms)
        if problem:
            raise ValueError(problem)
        catalogue = self.catalogue()
        for name, keys in (("deadlines", self.deadlines), ("on_timeout", self.on_timeout)):
            for kind in keys:
                # a misspelt kind would silently leave a guard on the default deadline/policy
                if kind != "default" and catalogue.get(kind) is None:
                    raise ValueError(
                        f"{name}.{kind}: unknown event kind; use 'default' or one of "
                        f"{', '.join(catalogue.kinds())}"
                    )

    @property
    def effective_redis_url(self) -> str:
        """The configured Redis URL, else the local default."""
        return self.redis_url or defaults.DEFAULT_REDIS_URL

    @property
    def effective_rq_redis_url(self) -> str:
        return self.rq.redis_url or self.effective_redis_url

    def catalogue(self) -> Catalogue:
        """The built-in catalogue extended by ``custom_kinds`` (built once per set)."""
        if not self.custom_kinds:
            return DEFAULT_CATALOGUE
        return _custom_catalogue(tuple(sorted(self.custom_kinds.items())))

    def _canonical_key(self, kind: str) -> str:
        spec = self.catalogue().get(kind)
        return normalise(spec.kind if spec else kind)

    def deadline_ms(self, kind: str) -> int:
        """Default deadline of a blocking request of ``kind`` (aliases accepted)."""
        wanted = self._canonical_key(kind)
        for key, ms in reversed(self.deadlines.items()):  # the last given (env over file)
            if self._canonical_key(key) == wanted:
                return ms
        return self.deadlines.get("default", defaults.DEFAULT_DEADLINE_MS)

    def on_timeout_for(self, kind: str) -> Policy:
        """What a request of ``kind`` decides when no answer comes in time."""
        wanted = self._canonical_key(kind)
        for key, policy in reversed(self.on_timeout.items()):
            if self._canonical_key(key) == wanted:
                return policy
        spec = self.catalogue().get(kind)
        canonical = spec.kind if spec else kind
        verdict = unanswered(canonical, self.on_timeout.get("default"))
        return "deny" if verdict == "deny" else "allow"


@functools.lru_cache(maxsize=16)
def _custom_catalogue(custom: tuple[tuple[str, bool], ...]) -> Catalogue:
    return DEFAULT_CATALOGUE.with_custom(dict(custom))


#: The sections (sub-Structs) by name, and the per-kind tables whose keys are event kinds.
SECTIONS: dict[str, type[msgspec.Struct]] = {
    "streams": StreamSettings,
    "workers": WorkerSettings,
    "rq": RQSettings,
    "reload": ReloadSettings,
    "security": SecuritySettings,
    "autonomy": AutonomySettings,
    "approvals": ApprovalSettings,
    "unguarded": UnguardedSettings,
}
TABLES = ("deadlines", "on_timeout", "custom_kinds")
TOP_LEVEL = tuple(f for f in Settings.__struct_fields__ if f not in SECTIONS and f not in TABLES)
