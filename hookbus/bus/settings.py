"""Configuration: defaults < ``hookbus.toml`` < ``HOOKBUS_*`` environment < flags.

The schema is a tree of frozen msgspec Structs, validated with ``msgspec.convert``. It is
deliberately not pydantic-settings: the producer path (an agent's per-event process, the
Claude Code adapter) must read the configuration, and importing pydantic-settings costs
160-300 ms here against a few ms for msgspec + tomllib. Manifests, which people write and
which need rich validation messages, stay on pydantic.

Environment variables: ``HOOKBUS_<FIELD>`` for top-level fields and
``HOOKBUS_<SECTION>__<FIELD>`` for sections (``HOOKBUS_SECURITY__SKIP_SECURITY_AUDIT=true``,
``HOOKBUS_DEADLINES__PRETOOLUSE=500``). Lists and tables may be given as JSON.
"""

from __future__ import annotations

import functools
import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import msgspec

from hookbus import defaults
from hookbus.bus.kinds import DEFAULT_CATALOGUE, Catalogue, normalise
from hookbus.errors import ConfigError

CONFIG_FILENAME = "hookbus.toml"
ENV_PREFIX = "HOOKBUS_"
CONFIG_ENV = "HOOKBUS_CONFIG"

Policy = Literal["allow", "deny"]
AutonomyLevel = Literal["readonly", "supervised", "full"]
Isolation = Literal["fork", "none"]


class StreamSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Stream trimming (approximate MAXLEN) and the event size limit."""

    requests_maxlen: int = defaults.DEFAULT_REQUESTS_MAXLEN
    events_maxlen: int = defaults.DEFAULT_EVENTS_MAXLEN
    decisions_maxlen: int = defaults.DEFAULT_DECISIONS_MAXLEN
    max_event_bytes: int = defaults.DEFAULT_MAX_EVENT_BYTES
    reply_ttl_s: int = defaults.DEFAULT_REPLY_TTL_S


class WorkerSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Heartbeats, liveness and redelivery limits of the worker fleet."""

    heartbeat_interval_ms: int = defaults.DEFAULT_HEARTBEAT_INTERVAL_MS
    dead_after_ms: int = defaults.DEFAULT_WORKER_DEAD_AFTER_MS
    prune_after_ms: int = defaults.DEFAULT_WORKER_PRUNE_AFTER_MS
    max_deliveries: int = defaults.DEFAULT_MAX_DELIVERIES
    concurrency: int = 1


class RQSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """RQ, which may live on its own (non-cluster) Redis."""

    redis_url: str | None = None
    result_ttl_s: int = defaults.DEFAULT_RQ_RESULT_TTL_S
    isolation: Isolation = "none"


class ReloadSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Hook bundles and the single-host stamp file."""

    data_dir: str | None = None
    bundle_history: int = defaults.DEFAULT_BUNDLE_HISTORY
    max_bundle_bytes: int = defaults.DEFAULT_MAX_BUNDLE_BYTES


class SecuritySettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The hook audit's switches. ``skip_security_audit`` is an operator's choice."""

    skip_security_audit: bool = False
    allow_manifest_skip: bool = False
    http_allowlist: tuple[str, ...] = ()
    allow_private_http: bool = False
    max_file_bytes: int = 1024 * 1024
    env_allowlist: tuple[str, ...] = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")


class AutonomySettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What agents may do to hooks on their own (seed 000's autonomy policy)."""

    level: AutonomyLevel = "supervised"
    allowed_commands: tuple[str, ...] = ()
    forbidden_paths: tuple[str, ...] = ("/etc", "/root", "~/.ssh", "~/.aws", "~/.gnupg")
    allow_hook_write: bool = True
    allow_shell_chaining: bool = False


class Settings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The effective configuration. Build it with :func:`load_settings`."""

    redis_url: str | None = None
    namespace: str = defaults.DEFAULT_NAMESPACE
    hooks_dir: str = defaults.DEFAULT_HOOKS_DIR
    deadlines: dict[str, int] = msgspec.field(default_factory=dict)
    on_timeout: dict[str, Policy] = msgspec.field(default_factory=dict)
    custom_kinds: dict[str, bool] = msgspec.field(default_factory=dict)
    log_level: str = "WARNING"
    streams: StreamSettings = msgspec.field(default_factory=StreamSettings)
    workers: WorkerSettings = msgspec.field(default_factory=WorkerSettings)
    rq: RQSettings = msgspec.field(default_factory=RQSettings)
    reload: ReloadSettings = msgspec.field(default_factory=ReloadSettings)
    security: SecuritySettings = msgspec.field(default_factory=SecuritySettings)
    autonomy: AutonomySettings = msgspec.field(default_factory=AutonomySettings)

    def __post_init__(self) -> None:
        for kind, ms in self.deadlines.items():
            if ms <= 0:
                raise ValueError(f"deadlines.{kind}: must be > 0 ms, got {ms}")
        catalogue = self.catalogue()
        for table, keys in (("deadlines", self.deadlines), ("on_timeout", self.on_timeout)):
            for kind in keys:
                # a misspelt kind would silently leave a guard on the default deadline/policy
                if kind != "default" and catalogue.get(kind) is None:
                    raise ValueError(
                        f"{table}.{kind}: unknown event kind; use 'default' or one of "
                        f"{', '.join(catalogue.kinds())}"
                    )
        if self.streams.max_event_bytes <= 0:
            raise ValueError("streams.max_event_bytes: must be > 0")

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
        for key, ms in self.deadlines.items():
            if self._canonical_key(key) == wanted:
                return ms
        return self.deadlines.get("default", defaults.DEFAULT_DEADLINE_MS)

    def on_timeout_for(self, kind: str) -> Policy:
        """What a request of ``kind`` decides when no answer comes in time."""
        wanted = self._canonical_key(kind)
        for key, policy in self.on_timeout.items():
            if self._canonical_key(key) == wanted:
                return policy
        if "default" in self.on_timeout:
            return self.on_timeout["default"]
        deny_kinds = {normalise(k) for k in defaults.DENY_ON_TIMEOUT_KINDS}
        return "deny" if wanted in deny_kinds else "allow"


@functools.lru_cache(maxsize=16)
def _custom_catalogue(custom: tuple[tuple[str, bool], ...]) -> Catalogue:
    return DEFAULT_CATALOGUE.with_custom(dict(custom))


Source = str
"""Where a value came from: ``default``, ``file:<path>``, ``env:<VAR>`` or ``flag``."""


@dataclass(frozen=True)
class LoadedSettings:
    """Settings plus where each value came from, for ``hookbus config show``."""

    settings: Settings
    sources: dict[str, Source] = field(default_factory=dict)
    file: Path | None = None

    @cached_property
    def masked(self) -> dict[str, Any]:
        """The settings as plain data with every password in a URL replaced by ``***``."""
        masked: dict[str, Any] = _mask(msgspec.to_builtins(self.settings))
        return masked


_SECTIONS = {
    name: typ
    for name, typ in (
        ("streams", StreamSettings),
        ("workers", WorkerSettings),
        ("rq", RQSettings),
        ("reload", ReloadSettings),
        ("security", SecuritySettings),
        ("autonomy", AutonomySettings),
    )
}
_TABLES = ("deadlines", "on_timeout", "custom_kinds")
_TOP = tuple(f for f in Settings.__struct_fields__ if f not in _SECTIONS and f not in _TABLES)


def find_config_file(explicit: str | Path | None = None, cwd: Path | None = None) -> Path | None:
    """``explicit``, else ``$HOOKBUS_CONFIG``, else ``./hookbus.toml`` when it exists."""
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            what = "is not a file" if path.exists() else "does not exist"
            raise ConfigError(f"config file {path} {what}")
        return path
    env = os.environ.get(CONFIG_ENV)
    if env:
        path = Path(env)
        if not path.is_file():
            raise ConfigError(f"{CONFIG_ENV}={env}: no such file")
        return path
    candidate = (cwd or Path.cwd()) / CONFIG_FILENAME
    return candidate if candidate.is_file() else None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc


def _env_value(raw: str) -> Any:
    """Env values are strings; JSON lists/tables are parsed, the rest msgspec coerces."""
    text = raw.strip()
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return raw
    return raw


def _read_env(environ: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The HOOKBUS_* variables as a nested dict, and the variable behind each dotted key."""
    data: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for var, raw in environ.items():
        if not var.startswith(ENV_PREFIX) or var == CONFIG_ENV:
            continue
        rest = var[len(ENV_PREFIX) :]
        if "__" in rest:
            section, _, name = rest.partition("__")
            section = section.lower()
            if section in _TABLES:
                # table keys are event kinds: keep the variable's spelling, matched loosely
                data.setdefault(section, {})[name] = _env_value(raw)
                origin[f"{section}.{name}"] = var
            elif section in _SECTIONS:
                key = name.lower()
                data.setdefault(section, {})[key] = _env_value(raw)
                origin[f"{section}.{key}"] = var
        else:
            key = rest.lower()
            if key in _TOP or key in _TABLES:
                data[key] = _env_value(raw)
                origin[key] = var
    return data, origin


def _merge(base: dict[str, Any], layer: Mapping[str, Any]) -> None:
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        elif isinstance(value, Mapping):
            base[key] = dict(value)
        else:
            base[key] = value


def _dotted(data: Mapping[str, Any], prefix: str = "") -> list[str]:
    keys: list[str] = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and (key in _SECTIONS or key in _TABLES or prefix):
            keys.extend(_dotted(value, f"{path}."))
        else:
            keys.append(path)
    return keys


_MSGSPEC_PATH = re.compile(r"`\$\.?([^`]*)`")


def load_settings(
    config_file: str | Path | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> LoadedSettings:
    """Build the effective settings. ``overrides`` are flag values (``None`` = not given)."""
    env = os.environ if environ is None else environ
    if config_file is None and environ is not None and CONFIG_ENV in environ:
        config_file = environ[CONFIG_ENV]
    path = find_config_file(config_file, cwd)
    merged: dict[str, Any] = {}
    sources: dict[str, Source] = {}
    if path is not None:
        file_data = _read_toml(path)
        _merge(merged, file_data)
        sources.update(dict.fromkeys(_dotted(file_data), f"file:{path}"))
    env_data, env_origin = _read_env(env)
    _merge(merged, env_data)
    sources.update({k: f"env:{v}" for k, v in env_origin.items()})
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    _merge(merged, flags)
    sources.update(dict.fromkeys(_dotted(flags), "flag"))
    try:
        settings = msgspec.convert(merged, Settings, strict=False)
    except (msgspec.ValidationError, ValueError) as exc:
        text = str(exc)
        match = _MSGSPEC_PATH.search(text)
        key = match.group(1).replace("[", ".").replace("]", "") if match else None
        origin = sources.get(key or "", f"file:{path}" if path else "configuration")
        raise ConfigError(f"invalid configuration ({origin}): {text}") from exc
    return LoadedSettings(settings=settings, sources=sources, file=path)


def mask_url(url: str) -> str:
    """``redis://user:secret@host`` → ``redis://user:***@host``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


_SECRET_KEY = re.compile(r"(password|secret|token)", re.IGNORECASE)


def _mask(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _mask(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v, key) for v in value]
    if isinstance(value, str):
        if key.endswith("url"):
            return mask_url(value)
        if _SECRET_KEY.search(key):
            return "***"
    return value
