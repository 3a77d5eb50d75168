"""``HOOKBUS_*`` environment variables as a nested dict, and warnings about misspelt ones.

``HOOKBUS_<FIELD>`` sets a top-level field and ``HOOKBUS_<SECTION>__<FIELD>`` a field of a
section (``HOOKBUS_RQ__RESULT_TTL_S=60``) or a key of a per-kind table
(``HOOKBUS_DEADLINES__PRETOOLUSE=500``). Values stay strings (``msgspec.convert(...,
strict=False)`` turns ``"60"`` into 60 and ``"true"`` into True) except lists and tables
given as JSON. A ``HOOKBUS_*`` variable that names no setting is not silently ignored: an
operator who typed ``HOOKBUS_NAMESPCE`` would otherwise run on the ``default`` namespace
without a word, so it is reported by name with the closest real variable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hookbus.bus.ids import AGENT_ID_ENV
from hookbus.bus.settings.discovery import STATE_ENV
from hookbus.bus.settings.schema import SECTIONS, TABLES, TOP_LEVEL
from hookbus.bus.settings.table import CONFIG_ENV, ENV_PREFIX, env_var

#: ``HOOKBUS_*`` variables that are not settings but are read (or set) elsewhere: the config
#: file's path, the worker role, what a shell hook is given, the example telemetry hook's
#: file, the KEDA address, bundle signing keys, the dev state file, the agent identity and
#: tmux switches of the harnesses and the supervisor, the gateway token, replay's candidate
#: folder. A part that reads a new one adds it here, so that it is not reported as a
#: misspelt setting (a test in tests/unit/test_config.py keeps this list complete).
OTHER_VARIABLES = frozenset(
    {
        CONFIG_ENV,
        "HOOKBUS_WORKER_ROLE",
        "HOOKBUS_HOOK_ID",
        "HOOKBUS_HOOK_DIR",
        "HOOKBUS_EVENT_KIND",
        "HOOKBUS_TELEMETRY_FILE",
        "HOOKBUS_REDIS_ADDRESS",
        STATE_ENV,
        "HOOKBUS_SIGNING_KEY_FILE",
        "HOOKBUS_VERIFY_KEY_FILE",
        "HOOKBUS_UNSIGNED_SAID",  # set by `hookbus dev` for its workers (bundles.signing)
        AGENT_ID_ENV,
        "HOOKBUS_OPENCLAW_SESSION_ID",
        "HOOKBUS_TMUX_SESSION",
        "HOOKBUS_TMUX_SOCKET_NAME",
        "HOOKBUS_TMUX_SOCKET_PATH",
        "HOOKBUS_REPLAY_HOOKS_DIR",
        "HOOKBUS_GATEWAY_TOKEN",
        "HOOKBUS_GATEWAY_TOKEN_FILE",
        "HOOKBUS_GATEWAY_TOKENS_FILE",
        "HOOKBUS_REDIS_URL_FILE",
        "HOOKBUS_METRICS_PORT",
        "HOOKBUS_OPERATOR",
        "HOOKBUS_CONSOLE_TOKEN",
        "HOOKBUS_CONSOLE_TOKEN_FILE",
        "HOOKBUS_CONSOLE_TOKENS_FILE",
        "HOOKBUS_CONSOLE_HOST",
        "HOOKBUS_CONSOLE_PORT",
    }
)
#: Prefixes of variables that belong to someone else (the test suite's own switches).
OTHER_PREFIXES = ("HOOKBUS_TEST_",)


def _value(raw: str) -> Any:
    """Env values are strings; JSON lists/tables are parsed, the rest msgspec coerces."""
    text = raw.strip()
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return raw
    return raw


def setting_variables() -> list[str]:
    """Every variable that names a setting (tables as ``HOOKBUS_DEADLINES__<KIND>``)."""
    names = [env_var(field) for field in TOP_LEVEL]
    for section, struct in SECTIONS.items():
        names += [env_var(f"{section}.{f}") for f in struct.__struct_fields__]
    return names


def unknown_variable_warning(var: str) -> str:
    """The line that reports a ``HOOKBUS_*`` variable naming no setting."""
    import difflib  # only a misspelt variable pays for it

    message = f"{var} is not a hookbus setting and is ignored"
    known = setting_variables() + sorted(OTHER_VARIABLES)
    # compare what follows the prefix, which every candidate shares
    rest = var.removeprefix(ENV_PREFIX)
    close = difflib.get_close_matches(rest, [k.removeprefix(ENV_PREFIX) for k in known], n=1)
    if not close and "__" in rest:
        section, _, name = rest.partition("__")
        tables = [t.upper() for t in TABLES]
        close = [f"{t}__{name}" for t in difflib.get_close_matches(section, tables, n=1)]
    close = [f"{ENV_PREFIX}{c}" for c in close]
    if close:
        message += f"; did you mean {close[0]}?"
    else:
        message += " (see `hookbus config show` for the settings)"
    return message


def read_env(
    environ: Mapping[str, str],
) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """The ``HOOKBUS_*`` variables as a nested dict, the variable behind each dotted key, and
    a warning for each variable that names no setting."""
    data: dict[str, Any] = {}
    origin: dict[str, str] = {}
    warnings: list[str] = []
    for var, raw in sorted(environ.items()):
        if not var.startswith(ENV_PREFIX) or var in OTHER_VARIABLES:
            continue
        if var.startswith(OTHER_PREFIXES):
            continue
        rest = var[len(ENV_PREFIX) :]
        section, sep, name = rest.partition("__")
        section = section.lower()
        if sep and section in TABLES and name:
            # table keys are event kinds: keep the variable's spelling, matched loosely
            data.setdefault(section, {})[name] = _value(raw)
            origin[f"{section}.{name}"] = var
        elif sep and section in SECTIONS and name.lower() in SECTIONS[section].__struct_fields__:
            key = name.lower()
            data.setdefault(section, {})[key] = _value(raw)
            origin[f"{section}.{key}"] = var
        elif not sep and (section in TOP_LEVEL or section in TABLES):
            data[section] = _value(raw)
            origin[section] = var
        else:
            warnings.append(unknown_variable_warning(var))
    return data, origin, warnings
