"""The user's own hookbus.toml, for agent CLIs that strip a hook's environment.

Gemini CLI with ``GITHUB_SHA`` set (any GitHub Actions run) hands a hook only PATH and HOME:
no ``HOOKBUS_*`` variable reaches it. The adapter still finds its Redis: through
``./hookbus.toml`` (the hook runs in the project folder), else through the user's config
dir, ``$XDG_CONFIG_HOME/hookbus/hookbus.toml`` (``~/.config/hookbus/hookbus.toml``). An
explicit ``--config`` or ``$HOOKBUS_CONFIG`` always wins. Stdlib ``os`` only: this runs on
the per-event path.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs ~2 ms per process
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

CONFIG_FILENAME = "hookbus.toml"


def user_config_file(environ: Mapping[str, str]) -> str | None:
    """The user-level hookbus.toml when it exists."""
    base = environ.get("XDG_CONFIG_HOME") or (
        os.path.join(environ["HOME"], ".config") if environ.get("HOME") else ""
    )
    if not base:
        return None
    candidate = os.path.join(base, "hookbus", CONFIG_FILENAME)
    return candidate if os.path.isfile(candidate) else None


def with_user_config(
    options: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> dict[str, Any]:
    """``options`` with ``config`` set to the user's hookbus.toml when nothing closer
    (``--config``, ``$HOOKBUS_CONFIG``, ``./hookbus.toml``) names one."""
    env = os.environ if environ is None else environ
    out = dict(options)
    if out.get("config") or env.get("HOOKBUS_CONFIG"):
        return out
    if os.path.isfile(os.path.join(cwd or os.getcwd(), CONFIG_FILENAME)):
        return out
    found = user_config_file(env)
    if found is not None:
        out["config"] = found
    return out
