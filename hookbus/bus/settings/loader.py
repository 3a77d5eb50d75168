"""Configuration: defaults < the user's ``hookbus.toml`` < a running ``hookbus dev`` < the
project's ``hookbus.toml`` < ``HOOKBUS_*`` environment < flags (the files are found by
:mod:`hookbus.bus.settings.discovery`, as every entry point finds them).

The schema (:mod:`hookbus.bus.settings.schema`) is a tree of frozen msgspec Structs; the
layers are merged into one nested dict and converted in one step with
``msgspec.convert(data, Settings, strict=False)``, which turns the environment's strings into
ints, bools and floats and checks every range.

Why not pydantic-settings, which does this out of the box: the producer path (an agent's
per-event process, ``hookbus publish``, the Claude Code adapter) must read the
configuration, and importing ``pydantic_settings`` costs 160-300 ms on this kind of machine
against a few ms for msgspec + tomllib, which the wire format loads anyway. So the
dependency was dropped rather than carried unused; manifests, which people write and which
need rich validation messages, stay on pydantic (off the producer path).

Environment variables: ``HOOKBUS_<FIELD>`` for top-level fields and
``HOOKBUS_<SECTION>__<FIELD>`` for sections (``HOOKBUS_SECURITY__SKIP_SECURITY_AUDIT=true``,
``HOOKBUS_DEADLINES__PRETOOLUSE=500``); see :mod:`hookbus.bus.settings.env`. A variable that
names no setting is logged as a warning (with the closest real name); a value of the wrong
form is a :class:`~hookbus.errors.ConfigError` naming the variable (or file) and the form
expected.
"""

from __future__ import annotations

import os
import re
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from hookbus.bus.resp import mask_url
from hookbus.bus.settings import discovery
from hookbus.bus.settings.env import read_env
from hookbus.bus.settings.schema import SECTIONS, TABLES, Settings
from hookbus.bus.settings.secrets import (
    REDIS_URL_FILE_ENV,
    config_file_warning,
    read_url_file,
    readable_by_others,
)
from hookbus.bus.settings.sections import (
    AutonomyLevel,
    AutonomySettings,
    Isolation,
    Policy,
    ReloadSettings,
    RQSettings,
    SecuritySettings,
    StreamSettings,
    WorkerSettings,
)
from hookbus.bus.settings.table import CONFIG_ENV, CONFIG_FILENAME, ENV_PREFIX
from hookbus.errors import ConfigError, StoppedDevError

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILENAME",
    "ENV_PREFIX",
    "AutonomyLevel",
    "AutonomySettings",
    "Isolation",
    "LoadedSettings",
    "Policy",
    "RQSettings",
    "ReloadSettings",
    "SecuritySettings",
    "Settings",
    "StreamSettings",
    "WorkerSettings",
    "find_config_file",
    "load_settings",
    "mask_url",
]

Source = str
"""Where a value came from: ``default``, ``file:<path>``, ``dev:<state file>``,
``env:<VAR>`` or ``flag``."""


class LoadedSettings:
    """Settings plus where each value came from, for ``hookbus config show``.

    A plain class, not a dataclass: ``dataclasses`` costs the lean ``hookbus publish``
    several ms of its budget."""

    __slots__ = ("dev", "file", "settings", "sources", "user_file", "warnings")

    def __init__(
        self,
        settings: Settings,
        sources: dict[str, Source] | None = None,
        file: Path | None = None,
        warnings: tuple[str, ...] = (),
        *,
        user_file: Path | None = None,
        dev: Path | None = None,
    ) -> None:
        self.settings = settings
        self.sources: dict[str, Source] = sources or {}
        #: the project's hookbus.toml, the user's, and a running dev's state file, if any
        self.file = file
        self.user_file = user_file
        self.dev = dev
        #: One line per ``HOOKBUS_*`` variable that names no setting (also logged).
        self.warnings = warnings

    @property
    def masked(self) -> dict[str, Any]:
        """The settings as plain data with every password in a URL replaced by ``***``."""
        masked: dict[str, Any] = _mask(msgspec.to_builtins(self.settings))
        return masked


def find_config_file(explicit: str | Path | None = None, cwd: Path | None = None) -> Path | None:
    """``explicit``, else ``$HOOKBUS_CONFIG``, else the first ``hookbus.toml`` from the
    working folder upward (:func:`hookbus.bus.settings.discovery.project_file`)."""
    found = discovery.project_file(
        str(explicit) if explicit else None, os.environ, str(cwd or Path.cwd())
    )
    return Path(found) if found else None


def _url_from_file(
    env: Mapping[str, str], env_data: dict[str, Any], env_origin: dict[str, str]
) -> None:
    """``HOOKBUS_REDIS_URL_FILE``: the Redis URL read from a file (keeps a password out of
    the environment listings and command lines); ``HOOKBUS_REDIS_URL`` wins over it."""
    path = env.get(REDIS_URL_FILE_ENV, "").strip()
    if not path or "redis_url" in env_data:
        return
    try:
        env_data["redis_url"] = read_url_file(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{REDIS_URL_FILE_ENV}={path}: cannot read the URL ({exc})") from exc
    env_origin["redis_url"] = REDIS_URL_FILE_ENV
    mode = readable_by_others(path)
    if mode is not None:
        import logging

        logging.getLogger(__name__).warning(
            "%s=%s is readable by other users (mode %o); chmod 600 it",
            REDIS_URL_FILE_ENV,
            path,
            mode,
        )


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
        if isinstance(value, Mapping) and (key in SECTIONS or key in TABLES or prefix):
            keys.extend(_dotted(value, f"{path}."))
        else:
            keys.append(path)
    return keys


def load_settings(
    config_file: str | Path | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    warn: bool = True,
    dev: bool = True,
) -> LoadedSettings:
    """Build the effective settings. ``overrides`` are flag values (``None`` = not given);
    ``dev=False`` leaves a running ``hookbus dev`` out (``hookbus dev`` itself).

    Each ``HOOKBUS_*`` variable that names no setting is logged as a warning unless
    ``warn`` is false (a caller loading the same environment a second time)."""
    env = os.environ if environ is None else environ
    found = discovery.find_layers(
        str(config_file) if config_file else None, env, str(cwd) if cwd else None, dev=dev
    )
    merged: dict[str, Any] = {}
    sources: dict[str, Source] = {}
    for source, data in found.layers:
        exposed = config_file_warning(source[5:], data) if source.startswith("file:") else None
        if exposed is not None and warn:
            import logging

            logging.getLogger(__name__).warning("%s", exposed)
        _merge(merged, data)
        sources.update(dict.fromkeys(_dotted(data), source))
    env_data, env_origin, warnings = read_env(env)
    _url_from_file(env, env_data, env_origin)
    if warnings and warn:
        # the lean commands cannot afford to import logging; only a warning needs it
        import logging

        log = logging.getLogger(__name__)
        for line in warnings:
            log.warning("%s", line)
    _merge(merged, env_data)
    sources.update({k: f"env:{v}" for k, v in env_origin.items()})
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    _merge(merged, flags)
    sources.update(dict.fromkeys(_dotted(flags), "flag"))
    path = Path(found.project) if found.project else None
    stopped = discovery.stopped_dev_problem(found, sources.get("redis_url"))
    if stopped is not None:
        raise StoppedDevError(stopped)
    try:
        settings = msgspec.convert(merged, Settings, strict=False)
    except (msgspec.ValidationError, ValueError) as exc:
        raise ConfigError(_explain(str(exc), merged, sources, path)) from exc
    return LoadedSettings(
        settings=settings,
        sources=sources,
        file=path,
        warnings=tuple(warnings),
        user_file=Path(found.user) if found.user else None,
        dev=Path(found.dev) if found.dev else None,
    )


# --- error messages that name the variable or file and the form expected -------------

# Patterns as strings, compiled (and cached by ``re``) on the error path only: compiling
# at import would cost every lean command about a millisecond each.
_MSGSPEC_PATH = r" - at `\$\.?([^`]*)`$"
_UNKNOWN_FIELD = r"^Object contains unknown field `([^`]*)`"
_OWN_MESSAGE = r"^([a-z_]+(?:\.[^:\s]+)?): "


def _explain(
    text: str, merged: Mapping[str, Any], sources: Mapping[str, Source], path: Path | None
) -> str:
    """Turn msgspec's ``Expected `int` >= 1 - at `$.workers.concurrency``` into a line that
    says where the value came from (variable, file or flag) and what form it must take."""
    fallback = f"file:{path}" if path else "configuration"
    at = re.search(_MSGSPEC_PATH, text)
    body = text[: at.start()] if at else text
    own = re.match(_OWN_MESSAGE, body)
    if at is None or own:  # the schema's own checks: "deadlines.X: unknown event kind ..."
        key = own.group(1) if own else ""
        return f"invalid configuration ({sources.get(key, fallback)}): {body}"
    key = at.group(1)
    unknown = re.match(_UNKNOWN_FIELD, text)
    if unknown:
        name = f"{key}.{unknown.group(1)}" if key else unknown.group(1)
        hint = _close_field(key, unknown.group(1))
        return f"invalid configuration ({fallback}): {name} is not a setting{hint}"
    if key.endswith("[...]"):  # msgspec does not say which key of a table; find it
        key = _bad_table_key(key.removesuffix("[...]"), merged)
    value = _lookup(merged, key)
    form = _describe(key)
    origin = sources.get(key, fallback)
    if origin.startswith("env:"):
        var = origin.removeprefix("env:")
        return f"invalid configuration: {var}={value!r}: expected {form} (setting {key})"
    return f"invalid configuration ({origin}): {key} = {value!r}: expected {form}"


def _close_field(section: str, name: str) -> str:
    import difflib

    if section in SECTIONS:
        names = list(SECTIONS[section].__struct_fields__)
    elif not section:
        names = list(Settings.__struct_fields__)
    else:
        return ""
    close = difflib.get_close_matches(name, names, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _lookup(data: Mapping[str, Any], key: str) -> Any:
    value: Any = data
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _bad_table_key(table: str, merged: Mapping[str, Any]) -> str:
    hints = typing.get_type_hints(Settings, include_extras=True)
    value_type = typing.get_args(hints.get(table, dict[str, Any]))[1]
    for name, value in (merged.get(table) or {}).items():
        try:
            msgspec.convert(value, value_type, strict=False)
        except msgspec.ValidationError:
            return f"{table}.{name}"
    return table


def _describe(key: str) -> str:
    """The form a setting takes, in words (``an integer from 1 to 1024``)."""
    import msgspec.inspect as mi

    info: Any = mi.type_info(Settings)
    for part in key.split("."):
        if isinstance(info, mi.StructType):
            info = next((f.type for f in info.fields if f.name == part), None)
        elif isinstance(info, mi.DictType):
            info = info.value_type
        if info is None:
            return "a valid value"
    return _form(info)


def _form(info: Any) -> str:
    import msgspec.inspect as mi

    if isinstance(info, mi.UnionType):
        forms = [_form(t) for t in info.types if not isinstance(t, mi.NoneType)]
        return " or ".join(forms)
    if isinstance(info, mi.IntType):
        low = info.ge if info.ge is not None else (info.gt + 1 if info.gt is not None else None)
        if low is not None and info.le is not None:
            return f"an integer from {low} to {info.le}"
        return f"an integer >= {low}" if low is not None else "an integer"
    if isinstance(info, mi.BoolType):
        return "true or false"
    if isinstance(info, mi.LiteralType):
        return "one of " + ", ".join(repr(v) for v in info.values)
    if isinstance(info, mi.VarTupleType | mi.ListType):
        return 'a list of strings (in a variable, as JSON: \'["a", "b"]\')'
    if isinstance(info, mi.DictType):
        return f"a table of {_form(info.value_type)}"
    if isinstance(info, mi.StructType):
        return "a table (a [section] in hookbus.toml)"
    if isinstance(info, mi.StrType):
        return "a string"
    return "a valid value"


# --- masking -------------------------------------------------------------------------


_SECRET_KEY = r"(?i)(password|secret|token)"


def _mask(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _mask(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v, key) for v in value]
    if isinstance(value, str):
        if key.endswith("url"):
            return mask_url(value)
        if re.search(_SECRET_KEY, key):
            return "***"
    return value
