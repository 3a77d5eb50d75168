"""The few settings an agent-CLI hook process needs, read without the settings schema.

:func:`hookbus.bus.settings.loader.load_settings` validates the whole schema with msgspec;
a hook process runs once per agent event and needs a few values. It finds the same files
the same way (:mod:`hookbus.bus.settings.discovery`), merges the same layers in the same
order, and reads and checks the settings the table of :mod:`hookbus.bus.settings.table`
lists with that table's names, ranges and checks. ``tomllib`` is loaded only when a file
exists. A property test holds this reader to ``load_settings``'s answers.

Kind names in ``[deadlines]`` / ``[on_timeout]`` are matched as the settings module matches
them (:func:`~hookbus.bus.settings.table.kind_key`): case, ``_`` and ``-`` ignored, the
catalogue's aliases resolved (``UserPromptSubmit`` finds ``PromptSubmit``'s entry and the
other way round).
"""

from __future__ import annotations

import os

from hookbus import defaults
from hookbus.bus.settings import discovery, secrets, table
from hookbus.errors import ConfigError

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    from collections.abc import Mapping


class LeanConfig:
    """Redis URL, namespace, partitions, stream limits, liveness and per-kind deadlines /
    policies, and where each came from."""

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
        "sources",
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
        sources: Mapping[str, str] | None = None,
    ) -> None:
        self.redis_url = redis_url
        self.namespace = namespace
        # keyed by kind (aliases resolved); of two spellings of one kind the later wins,
        # as the schema's lookup has it (a variable over the file)
        self.deadlines = {table.kind_key(k): v for k, v in (deadlines or {}).items()}
        self.on_timeout = {table.kind_key(k): v for k, v in (on_timeout or {}).items()}
        self.events_maxlen = events_maxlen
        self.requests_maxlen = requests_maxlen
        self.max_event_bytes = max_event_bytes
        self.dead_after_ms = dead_after_ms
        self.file = file
        #: ``HOOKBUS_PARTITIONS``: events go to their session's partition, as the SDK's do.
        self.partitions = partitions
        #: where each dotted setting came from (``file:...``, ``dev:...``, ``env:VAR``)
        self.sources = dict(sources or {})

    def deadline_ms(self, *names: str) -> int:
        """The configured deadline of the first of ``names`` that has one, else default."""
        for name in names:
            found = self.deadlines.get(table.kind_key(name))
            if found is not None:
                return found
        return self.deadlines.get("default", defaults.DEFAULT_DEADLINE_MS)

    def policy(self, *names: str) -> str | None:
        """The configured ``on_timeout`` of the first of ``names`` that has one (or the
        configured default); None when config says nothing."""
        for name in names:
            found = self.on_timeout.get(table.kind_key(name))
            if found is not None:
                return found
        return self.on_timeout.get("default")


#: The largest float msgspec takes for a whole number (beyond it a float is not exact).
_EXACT_FLOAT = 2**53


def _int(value: object, where: str) -> int:
    """A whole number as the schema reads one: an int, a float with no fraction, or (from
    a variable) a string of decimal digits with no sign but ``-`` and no leading zero."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) <= _EXACT_FLOAT:
        return int(value)
    if isinstance(value, str) and value.isascii():
        digits = value[1:] if value.startswith("-") else value
        if digits.isdigit() and (digits == "0" or not digits.startswith("0")):
            return int(value)
    raise ConfigError(f"{where}: expected a whole number, got {value!r}")


def _lookup(data: Mapping[str, object], path: str) -> object:
    section, dot, name = path.partition(".")
    if not dot:
        return data.get(section)
    inner = data.get(section)
    return inner.get(name) if isinstance(inner, dict) else None


def _merge_layer(
    values: dict[str, object], tables: dict[str, dict[str, object]], data: Mapping[str, object]
) -> None:
    for field in table.LEAN_FIELDS:
        section, dot, _ = field.path.partition(".")
        if dot and section in data and not isinstance(data[section], dict):
            raise ConfigError(f"{section}: expected a table")
        found = _lookup(data, field.path)
        if found is not None:
            values[field.path] = found
    for name in table.LEAN_TABLES:
        entries = data.get(name)
        if entries is None:
            continue
        if not isinstance(entries, dict):
            raise ConfigError(f"{name}: expected a table")
        tables[name].update(entries)


def _env_layer(
    env: Mapping[str, str], values: dict[str, object], tables: dict[str, dict[str, object]]
) -> dict[str, str]:
    sources = {}
    for field in table.LEAN_FIELDS:
        var = field.env
        if var in env:
            values[field.path] = env[var]
            sources[field.path] = f"env:{var}"
    prefixes = [(name, table.env_var(f"{name}.")) for name in table.LEAN_TABLES]
    found = []
    for var, raw in env.items():  # one pass: a process's environment can be long
        if not var.startswith(table.ENV_PREFIX):
            continue
        for name, prefix in prefixes:
            if var.startswith(prefix) and len(var) > len(prefix):
                found.append((var, name, var[len(prefix) :], raw))
    # in the variables' name order, as the full reader takes them: of two spellings of one
    # kind, the same one wins in both
    for var, name, kind, raw in sorted(found):
        tables[name][kind] = raw
        sources[f"{name}.{kind}"] = f"env:{var}"
    return sources


def _url_from_file(
    env: Mapping[str, str], values: dict[str, object], sources: dict[str, str]
) -> None:
    """``HOOKBUS_REDIS_URL_FILE``: the Redis URL from a file, unless the environment gives
    one itself."""
    path = env.get(secrets.REDIS_URL_FILE_ENV, "").strip()
    if not path or sources.get("redis_url", "").startswith("env:"):
        return
    try:
        values["redis_url"] = secrets.read_url_file(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{secrets.REDIS_URL_FILE_ENV}={path}: {exc}") from exc
    sources["redis_url"] = f"env:{secrets.REDIS_URL_FILE_ENV}"


def _warn_exposed(path: str, data: Mapping[str, object]) -> None:
    """Say on stderr when the file holds a Redis password other users can read."""
    warning = secrets.config_file_warning(path, data)
    if warning is not None:
        import sys

        sys.stderr.write(f"hookbus: warning: {warning}\n")


def load(
    environ: Mapping[str, str] | None = None,
    cwd: str | None = None,
    explicit: str | None = None,
) -> LeanConfig:
    """The effective values; :class:`ConfigError` names the file or variable at fault."""
    env = os.environ if environ is None else environ
    found = discovery.find_layers(explicit, env, cwd)
    values: dict[str, object] = {}
    tables: dict[str, dict[str, object]] = {name: {} for name in table.LEAN_TABLES}
    sources: dict[str, str] = {}
    for source, data in found.layers:
        if source.startswith("file:"):
            _warn_exposed(source[5:], data)
        _merge_layer(values, tables, data)
        given = [f.path for f in table.LEAN_FIELDS if _lookup(data, f.path) is not None]
        sources.update(dict.fromkeys(given, source))
    sources.update(_env_layer(env, values, tables))
    _url_from_file(env, values, sources)
    stopped = discovery.stopped_dev_problem(found, sources.get("redis_url"))
    if stopped is not None:
        raise ConfigError(stopped)
    out: dict[str, object] = {}
    for field in table.LEAN_FIELDS:
        value = values.get(field.path, field.default)
        if field.is_int and value is not None:
            number = _int(value, sources.get(field.path, field.path))
            problem = field.problem(number)
            if problem:
                raise ConfigError(problem)
            value = number
        elif value is not None and not isinstance(value, str):
            raise ConfigError(f"{field.path}: expected a string, got {value!r}")
        out[field.path.rpartition(".")[2]] = value
    deadlines = {k: _int(v, f"deadlines.{k}") for k, v in tables["deadlines"].items()}
    on_timeout = {}
    for kind, policy in tables["on_timeout"].items():
        if policy not in table.POLICIES:
            raise ConfigError(f"on_timeout.{kind}: must be 'allow' or 'deny', got {policy!r}")
        on_timeout[kind] = str(policy)
    problems = [
        table.namespace_problem(str(out["namespace"])),
        table.liveness_problem(
            int(str(out["dead_after_ms"])), int(str(out["heartbeat_interval_ms"]))
        ),
        *(table.deadline_problem(kind, ms) for kind, ms in deadlines.items()),
    ]
    problem = next((p for p in problems if p), None)
    if problem:
        raise ConfigError(problem)
    return LeanConfig(
        redis_url=str(out["redis_url"] or defaults.DEFAULT_REDIS_URL),
        namespace=str(out["namespace"]),
        deadlines=deadlines,
        on_timeout=on_timeout,
        events_maxlen=int(str(out["events_maxlen"])),
        requests_maxlen=int(str(out["requests_maxlen"])),
        max_event_bytes=int(str(out["max_event_bytes"])),
        dead_after_ms=int(str(out["dead_after_ms"])),
        partitions=int(str(out["partitions"])),
        file=found.project,
        sources=sources,
    )
