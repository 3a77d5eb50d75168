"""The few settings an adapter process needs, read without the settings module.

:mod:`hookbus.bus.settings.loader` validates the whole schema with msgspec; an adapter process runs
once per agent event and needs a few values, so it reads them straight from the same sources
in the same order: defaults < ``hookbus.toml`` (``$HOOKBUS_CONFIG``, else ``./hookbus.toml``)
< ``HOOKBUS_*``. ``tomllib`` (about 12 ms to import here) is loaded only when a file exists.

Kind names in ``[deadlines]`` / ``[on_timeout]`` are matched as the settings module matches
them (case, ``_`` and ``-`` ignored) against the event's canonical kind and its name in the
agent CLI (``UserPromptSubmit`` finds ``PromptSubmit``'s entry and the other way round).
"""

from __future__ import annotations

import os

from hookbus import defaults
from hookbus.errors import ConfigError

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs ~2 ms per process
if TYPE_CHECKING:
    from collections.abc import Mapping

CONFIG_FILENAME = "hookbus.toml"
CONFIG_ENV = "HOOKBUS_CONFIG"


def normalise(name: str) -> str:
    """The lookup key of a kind name (the catalogue's rule, without importing it)."""
    return name.replace("_", "").replace("-", "").replace(" ", "").lower()


class LeanConfig:
    """Redis URL, namespace, partitions, stream limits, liveness and per-kind deadlines /
    policies."""

    __slots__ = (
        "dead_after_ms",
        "deadlines",
        "events_maxlen",
        "file",
        "max_event_bytes",
        "namespace",
        "on_timeout",
        "partitions",
        "redis_url",
        "requests_maxlen",
    )

    def __init__(
        self,
        *,
        redis_url: str = defaults.DEFAULT_REDIS_URL,
        namespace: str = defaults.DEFAULT_NAMESPACE,
        deadlines: Mapping[str, int] | None = None,
        on_timeout: Mapping[str, str] | None = None,
        events_maxlen: int = defaults.DEFAULT_EVENTS_MAXLEN,
        requests_maxlen: int = defaults.DEFAULT_REQUESTS_MAXLEN,
        max_event_bytes: int = defaults.DEFAULT_MAX_EVENT_BYTES,
        dead_after_ms: int = defaults.DEFAULT_WORKER_DEAD_AFTER_MS,
        file: str | None = None,
        partitions: int = 1,
    ) -> None:
        self.redis_url = redis_url
        self.namespace = namespace
        self.deadlines = {normalise(k): v for k, v in (deadlines or {}).items()}
        self.on_timeout = {normalise(k): v for k, v in (on_timeout or {}).items()}
        self.events_maxlen = events_maxlen
        self.requests_maxlen = requests_maxlen
        self.max_event_bytes = max_event_bytes
        self.dead_after_ms = dead_after_ms
        self.file = file
        #: ``HOOKBUS_PARTITIONS``: events go to their session's partition, as the SDK's do.
        self.partitions = partitions

    def deadline_ms(self, *names: str) -> int:
        """The configured deadline of the first of ``names`` that has one, else default."""
        for name in names:
            found = self.deadlines.get(normalise(name))
            if found is not None:
                return found
        return self.deadlines.get("default", defaults.DEFAULT_DEADLINE_MS)

    def policy(self, *names: str) -> str | None:
        """The configured ``on_timeout`` of the first of ``names`` that has one (or the
        configured default); None when config says nothing."""
        for name in names:
            found = self.on_timeout.get(normalise(name))
            if found is not None:
                return found
        return self.on_timeout.get("default")


def _int(value: object, where: str) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected a whole number, got {value!r}")
    try:
        return int(value)  # type: ignore[call-overload,no-any-return]
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: expected a whole number, got {value!r}") from exc


def _table(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table")
    return value


def find_file(environ: Mapping[str, str], cwd: str | None) -> str | None:
    """``$HOOKBUS_CONFIG`` (which must exist), else ``./hookbus.toml`` when present."""
    explicit = environ.get(CONFIG_ENV)
    if explicit:
        if not os.path.isfile(explicit):
            raise ConfigError(f"{CONFIG_ENV}={explicit}: no such file")
        return explicit
    candidate = os.path.join(cwd or os.getcwd(), CONFIG_FILENAME)
    return candidate if os.path.isfile(candidate) else None


def _from_dev(values: dict[str, object]) -> None:
    """Fill an unconfigured Redis URL / namespace from a running ``hookbus dev`` for this
    folder or one above it (its embedded server listens on a port of its own choosing), as
    every other hookbus command does (:mod:`hookbus.bus.dev_state`, stdlib only)."""
    from hookbus.bus.dev_state import find_state

    found = find_state()
    if found is None:
        return
    state = found[1]
    for key in ("redis_url", "namespace"):
        if values[key] is None and isinstance(state.get(key), str):
            values[key] = state[key]


def load(environ: Mapping[str, str] | None = None, cwd: str | None = None) -> LeanConfig:
    """The effective values; :class:`ConfigError` names the file or variable at fault."""
    env = os.environ if environ is None else environ
    path = find_file(env, cwd)
    data: dict[str, object] = {}
    if path is not None:
        import tomllib

        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    streams = _table(data.get("streams", {}), "streams")
    workers = _table(data.get("workers", {}), "workers")
    deadlines = {
        k: _int(v, f"deadlines.{k}")
        for k, v in _table(data.get("deadlines", {}), "deadlines").items()
    }
    on_timeout = {k: str(v) for k, v in _table(data.get("on_timeout", {}), "on_timeout").items()}
    values: dict[str, object] = {
        "redis_url": data.get("redis_url"),
        "namespace": data.get("namespace"),
        "events_maxlen": streams.get("events_maxlen"),
        "requests_maxlen": streams.get("requests_maxlen"),
        "max_event_bytes": streams.get("max_event_bytes"),
        "dead_after_ms": workers.get("dead_after_ms"),
        "partitions": data.get("partitions"),
    }
    env_names = {
        "redis_url": "HOOKBUS_REDIS_URL",
        "namespace": "HOOKBUS_NAMESPACE",
        "events_maxlen": "HOOKBUS_STREAMS__EVENTS_MAXLEN",
        "requests_maxlen": "HOOKBUS_STREAMS__REQUESTS_MAXLEN",
        "max_event_bytes": "HOOKBUS_STREAMS__MAX_EVENT_BYTES",
        "dead_after_ms": "HOOKBUS_WORKERS__DEAD_AFTER_MS",
        "partitions": "HOOKBUS_PARTITIONS",
    }
    for key, var in env_names.items():
        if env.get(var):
            values[key] = env[var]
    if values["redis_url"] is None:  # only a dev server lives at a port of its own choosing
        _from_dev(values)
    for var, raw in env.items():
        if var.startswith("HOOKBUS_DEADLINES__"):
            deadlines[var[len("HOOKBUS_DEADLINES__") :]] = _int(raw, var)
        elif var.startswith("HOOKBUS_ON_TIMEOUT__"):
            on_timeout[var[len("HOOKBUS_ON_TIMEOUT__") :]] = raw
    for kind, policy in on_timeout.items():
        if policy not in ("allow", "deny"):
            raise ConfigError(f"on_timeout.{kind}: must be 'allow' or 'deny', got {policy!r}")
    for kind, ms in deadlines.items():
        if ms <= 0:
            raise ConfigError(f"deadlines.{kind}: must be > 0 ms, got {ms}")
    ints = {
        key: _int(values[key], key)
        for key in (
            *("events_maxlen", "requests_maxlen", "max_event_bytes", "dead_after_ms"),
            "partitions",
        )
        if values[key] is not None
    }
    if not 1 <= ints.get("partitions", 1) <= 1024:
        raise ConfigError(f"partitions: must be 1 to 1024, got {ints['partitions']}")
    return LeanConfig(
        redis_url=str(values["redis_url"] or defaults.DEFAULT_REDIS_URL),
        namespace=str(values["namespace"] or defaults.DEFAULT_NAMESPACE),
        deadlines=deadlines,
        on_timeout=on_timeout,
        file=path,
        **ints,
    )
