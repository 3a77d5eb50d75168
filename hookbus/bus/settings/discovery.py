"""Where the configuration is found: one search for every entry point.

The SDK (``HookBus.from_url()``), every ``hookbus`` command, the per-event agent-CLI hooks
and the gateway read their settings from the same layers, highest first:

1. flags (the caller's overrides);
2. ``HOOKBUS_*`` variables;
3. ``hookbus.toml``: ``--config`` / ``$HOOKBUS_CONFIG`` when given, else the first found
   from the working folder upward (a command run in a sub-folder of the project finds it);
4. a running ``hookbus dev``: its state file for the working folder or one above it, else
   the per-user pointer to the last one started, so a Claude Code session started anywhere
   on the machine finds it (``$HOOKBUS_DEV_STATE`` names the file outright); a state whose
   process is gone is ignored;
5. the user's ``$XDG_CONFIG_HOME/hookbus/hookbus.toml`` (``~/.config/hookbus/hookbus.toml``);
6. the defaults.

This module finds the files and reads them into plain dicts (layers 3 to 5); each reader
merges the layers the same way and validates them its own way (msgspec for
:func:`~hookbus.bus.settings.loader.load_settings`, the table of
:mod:`~hookbus.bus.settings.table` for the lean hook). Standard library only, and
``os.path`` rather than ``pathlib`` (which loads ``re`` and ``urllib``): the per-event hook
runs it on every event.
"""

from __future__ import annotations

import os

from hookbus.bus.settings.table import CONFIG_ENV, CONFIG_FILENAME
from hookbus.errors import ConfigError

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: Names a ``hookbus dev`` state file outright (tests, or a dev stack shared across folders).
STATE_ENV = "HOOKBUS_DEV_STATE"
#: The settings a running ``hookbus dev`` provides to other commands.
DEV_PROVIDES = ("redis_url", "namespace", "hooks_dir")
#: The per-user pointer to the last ``hookbus dev`` started, in :func:`state_dir`.
POINTER_NAME = "current.json"


class Layers:
    """The configuration files found, as plain data, lowest precedence first.

    ``layers`` holds ``(source, data)`` pairs: ``("file:<path>", {...})`` for the user's
    and the project's ``hookbus.toml``, ``("dev:<path>", {...})`` for a running dev."""

    __slots__ = ("dev", "layers", "project", "stopped", "user")

    def __init__(self) -> None:
        self.project: str | None = None
        self.user: str | None = None
        self.dev: str | None = None
        #: ``(state file, state)`` of the ``hookbus dev`` this folder's commands would use
        #: had it not stopped (see :func:`stopped_dev_problem`).
        self.stopped: tuple[str, dict[str, Any]] | None = None
        self.layers: list[tuple[str, dict[str, Any]]] = []


def find_layers(
    explicit: str | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: str | None = None,
    *,
    dev: bool = True,
) -> Layers:
    """The user file, a running dev and the project file (see the module's order)."""
    env = os.environ if environ is None else environ
    here = cwd or working_folder()
    found = Layers()
    found.user = user_file(env)
    if found.user is not None:
        found.layers.append((f"file:{found.user}", read_toml(found.user)))
    if dev:
        state = find_dev(env, here)
        if state is not None:
            found.dev = state[0]
            provided = {k: state[1][k] for k in DEV_PROVIDES if isinstance(state[1].get(k), str)}
            found.layers.append((f"dev:{state[0]}", provided))
        else:
            found.stopped = _stopped_dev(env, here)
    found.project = project_file(explicit, env, here)
    if found.project is not None and found.project != found.user:
        found.layers.append((f"file:{found.project}", read_toml(found.project)))
    return found


# --- hookbus.toml -------------------------------------------------------------------


def project_file(explicit: str | None, environ: Mapping[str, str], cwd: str) -> str | None:
    """``explicit`` (``--config``), else ``$HOOKBUS_CONFIG``, which must exist, else the
    first ``hookbus.toml`` from ``cwd`` upward."""
    if explicit:
        if not os.path.isfile(explicit):
            what = "is not a file" if os.path.exists(explicit) else "does not exist"
            raise ConfigError(f"config file {explicit} {what}")
        return explicit
    named = environ.get(CONFIG_ENV)
    if named:
        if not os.path.isfile(named):
            raise ConfigError(f"{CONFIG_ENV}={named}: no such file")
        return named
    for folder in upward(cwd):
        candidate = os.path.join(folder, CONFIG_FILENAME)
        if os.path.isfile(candidate):
            return candidate
    return None


def user_file(environ: Mapping[str, str]) -> str | None:
    """The user's own ``hookbus.toml`` when it exists."""
    base = environ.get("XDG_CONFIG_HOME") or (
        os.path.join(environ["HOME"], ".config") if environ.get("HOME") else ""
    )
    if not base:
        return None
    candidate = os.path.join(base, "hookbus", CONFIG_FILENAME)
    return candidate if os.path.isfile(candidate) else None


def working_folder() -> str:
    """The working folder; the root when it was deleted under the process (an agent CLI
    may run a hook from a folder that is gone): the search then starts from the top."""
    try:
        return os.getcwd()
    except OSError:
        return os.sep


def upward(folder: str) -> list[str]:
    """``folder`` (made absolute, links resolved) and every folder above it."""
    here = os.path.realpath(folder)
    out = [here]
    while True:
        parent = os.path.dirname(here)
        if parent == here:
            return out
        out.append(parent)
        here = parent


def read_toml(path: str) -> dict[str, Any]:
    """A TOML file as a dict; :class:`ConfigError` naming the file when it cannot be."""
    import tomllib  # a few ms; most invocations have no hookbus.toml

    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc


# --- a running hookbus dev ----------------------------------------------------------


def state_dir(environ: Mapping[str, str] | None = None) -> str:
    """Where ``hookbus dev`` state files and the pointer live: private to the user."""
    env = os.environ if environ is None else environ
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return os.path.join(runtime, "hookbus")
    cache = env.get("XDG_CACHE_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".cache"
    )
    return os.path.join(cache, "hookbus")


def state_path(folder: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The state file of a ``hookbus dev`` started in ``folder`` (default: the cwd):
    ``dev-<name>-<hash of the path>.json``, so two projects never see each other's."""
    env = os.environ if environ is None else environ
    explicit = env.get(STATE_ENV)
    if explicit:
        return explicit
    return _state_file(os.path.realpath(folder or os.getcwd()), env)


def _state_file(where: str, env: Mapping[str, str]) -> str:
    """:func:`state_path` of an absolute, resolved folder."""
    tag = f"{_fnv1a(where.encode()):08x}"
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in os.path.basename(where))
    return os.path.join(state_dir(env), f"dev-{name or 'root'}-{tag}.json")


def _fnv1a(data: bytes) -> int:
    """32-bit FNV-1a: a stable hash of a path in pure Python (``zlib``, a C extension, costs
    every hook process a few hundred microseconds to load)."""
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def pointer_path(environ: Mapping[str, str] | None = None) -> str:
    return os.path.join(state_dir(environ), POINTER_NAME)


def find_dev(
    environ: Mapping[str, str] | None = None, cwd: str | None = None
) -> tuple[str, dict[str, Any]] | None:
    """``(state file, state)`` of a live ``hookbus dev``: for ``cwd`` or a folder above
    it, else the one the per-user pointer names."""
    env = os.environ if environ is None else environ
    for path in _dev_candidates(env, cwd or working_folder()):
        state = read_json(path)
        if state is not None and dev_alive(state):
            return path, state
    return None


def dev_alive(state: Mapping[str, Any]) -> bool:
    """Whether the ``hookbus dev`` of a state file still runs: it marks its file stopped
    as it exits, and one that was killed left a pid that is gone."""
    return not state.get("stopped") and pid_alive(state.get("pid"))


def stopped_dev_problem(found: Layers, redis_url_source: str | None) -> str | None:
    """Why no settings may be built, when the ``hookbus dev`` these commands used has
    stopped and nothing that outranks it (a flag, a variable, the project's hookbus.toml)
    names a Redis: falling through to the user's file or the default 127.0.0.1:6379 would
    quietly hand every guard to whatever fleet listens there."""
    if found.stopped is None:
        return None
    outranked = redis_url_source is not None and not redis_url_source.startswith("dev:")
    if outranked and redis_url_source != f"file:{found.user}":
        return None
    path, state = found.stopped
    where = state.get("folder") or "?"
    return (
        f"the hookbus dev these commands use (started in {where}) has stopped: start it again "
        f"(`hookbus dev` in {where}) or configure a Redis (HOOKBUS_REDIS_URL, or redis_url in "
        f"the project's hookbus.toml); to use the default Redis instead, delete {path}"
    )


def _dev_candidates(env: Mapping[str, str], cwd: str) -> list[str]:
    """The state files that may name this folder's dev, nearest first: ``$HOOKBUS_DEV_STATE``
    alone, else this folder's and each one above it, then the per-user pointer's."""
    if env.get(STATE_ENV):
        return [env[STATE_ENV]]
    candidates = [_state_file(folder, env) for folder in upward(cwd)]
    pointed = read_json(pointer_path(env))
    if pointed is not None and isinstance(pointed.get("state"), str):
        candidates.append(pointed["state"])
    return candidates


def _stopped_dev(env: Mapping[str, str], cwd: str) -> tuple[str, dict[str, Any]] | None:
    """The nearest state file of a ``hookbus dev`` that no longer runs, when no live one
    was found."""
    for path in _dev_candidates(env, cwd):
        state = read_json(path)
        if state is not None:
            return path, state
    return None


def pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def read_json(path: str) -> dict[str, Any] | None:
    """A small JSON object file, or None when it is missing or not one."""
    from hookbus.bus import lean_json

    try:
        with open(path, "rb") as fh:
            data = lean_json.loads(fh.read())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
