"""``hookbus opencode install`` / ``uninstall``: hookbus's plugin file, and the same for forks.

OpenCode has no hook settings to merge: it loads every ``{plugin,plugins}/*.js`` of its
config folders. So the installer writes one file of its own, ``plugin/hookbus.js``
(:data:`PLUGIN_SOURCE`, package data, with its configuration filled in: the hook points to
send, each one's ``hookbus <cli> hook --timeout N`` command or gateway URL, its wait and
whether it is a guard) and never edits a file it did not write. Re-installing rewrites the
file; uninstalling deletes it (and the plugin folder, if that leaves it empty), so the
user's configuration is as it was.

A plugin that does not load is skipped by OpenCode without a word, which would leave every
call unguarded. So after writing, the installer loads the file with the CLI's own runtime
(its executable acts as Bun with ``BUN_BE_BUN=1``; else ``node``), calls the plugin and
checks that it returns every hook it should; a file that fails is removed again and the
install fails (:class:`PluginLoadError`). Where neither runtime is on PATH the check is
skipped and the outcome says so. Kilo CLI's installer is this one with Kilo's folders
(:mod:`hookbus.harnesses.install.kilo`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from hookbus.errors import HookBusError
from hookbus.harnesses.adapters import REQUEST, Adapter
from hookbus.harnesses.install import hook_commands, table
from hookbus.harnesses.install.claude_code import hookbus_command
from hookbus.harnesses.install.settings_file import Change, SettingsFileError
from hookbus.harnesses.opencode_adapter import ADAPTER, EVENT_HOOK, PLUGIN_HOOKS

Mode = Literal["command", "http"]

#: The plugin's source, shipped beside this module.
PLUGIN_SOURCE = "opencode_plugin.js"
#: The placeholders the installer fills in the source.
CONFIG_SLOT, CLI_SLOT = "__CONFIG__", "__CLI__"
#: What brackets the configuration in a written plugin (how a file is known as ours).
CONFIG_START, CONFIG_END = "/* hookbus-config */", "/* end hookbus-config */"
#: How long a hook point's command may take, in s (a parkable request waits longer).
ENTRY_TIMEOUT_S = 10
#: How long loading the written plugin may take, in s (a cold Bun start is about 1 s).
LOAD_CHECK_TIMEOUT_S = 60
#: What the load check prints once the plugin returned all its hooks.
LOADED = "hookbus-plugin-loads"
#: Run by the CLI's runtime (``-e``): import the plugin, call it, check its hooks.
PROBE = """
(async () => {
  const url = require("url").pathToFileURL(process.env.PLUGIN_FILE_TO_CHECK).href;
  const module = await import(url);
  const plugins = Object.values(module).filter((f) => typeof f === "function");
  if (!plugins.length) throw new Error("it exports no plugin function");
  const dir = process.cwd();
  const hooks = await plugins[0]({ client: {}, project: {}, directory: dir, worktree: dir });
  const want = JSON.parse(process.env.PLUGIN_HOOKS_TO_CHECK);
  const missing = want.filter((name) => !hooks || typeof hooks[name] !== "function");
  if (missing.length) throw new Error("it returns no " + missing.join(", ") + " hook");
  console.log("%s");
})().catch((e) => { console.error(String(e && e.stack || e)); process.exit(1); });
""".replace("%s", LOADED)


class PluginLoadError(HookBusError):
    """The plugin hookbus wrote does not load in the CLI's runtime (the CLI would skip it
    without a word and guard nothing); the file was removed again."""

    def __init__(self, path: Path, runtime: str, detail: str) -> None:
        super().__init__(
            f"{path} does not load with {runtime}: {detail}; it was removed again (the CLI "
            "would skip it silently and run every call unguarded). Report this with the "
            "CLI's version"
        )
        self.path = path
        self.detail = f"it does not load with {runtime}: {detail}"


def plugin_source() -> str:
    return resources.files("hookbus.harnesses.install").joinpath(PLUGIN_SOURCE).read_text()


def _user_path(template: str, home: Path | None) -> Path:
    """``~/.config/<cli>/...`` under ``$XDG_CONFIG_HOME`` where it is set (as the CLI reads)."""
    config = os.environ.get("XDG_CONFIG_HOME")
    if home is None and config and template.startswith("~/.config/"):
        return Path(config) / template.removeprefix("~/.config/")
    return table.home_path(template, home, None)


def _hooks_of(points: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The plugin hooks the plugin must return for ``points``."""
    hooks = {str(point["hook"]) for point in points.values()}
    return sorted(hooks | {"experimental.chat.system.transform"})


@dataclass(frozen=True)
class PluginFile:
    """The plugin file of ``adapter``'s CLI (OpenCode or a fork); ``label`` names it."""

    adapter: Adapter
    label: str

    def settings_path(
        self, scope: str, *, home: Path | None = None, project: Path | None = None
    ) -> Path:
        """The plugin file of ``scope``: user (the CLI's config folder) or project."""
        template = self.adapter.settings[scope]
        if template.startswith("~/"):
            return _user_path(template, home)
        return table.home_path(template, home, project)

    def points(
        self, events: Iterable[str] | None, *, command: str, mode: Mode, url: str
    ) -> dict[str, dict[str, Any]]:
        """Each hook point to send: the plugin hook it arrives on, its command or URL, its
        wait (the command's deadline stays under it) and whether it is a guard."""
        wanted = table.wanted_entries(self.adapter, events, self.label, lambda event: {})
        points: dict[str, dict[str, Any]] = {}
        for name in wanted:
            route = self.adapter.route(name)
            timeout = hook_commands.entry_timeout(route, ENTRY_TIMEOUT_S)
            point: dict[str, Any] = {
                "hook": name if name in PLUGIN_HOOKS else EVENT_HOOK,
                "guard": route.guard,
                "request": route.mode == REQUEST,
                "wait_s": timeout,
            }
            if mode == "http":
                endpoint = hook_commands.gateway_endpoint(
                    url or hook_commands.DEFAULT_GATEWAY_URL, self.adapter.name
                )
                point["url"] = f"{endpoint}?timeout={timeout}"
            else:
                point["command"] = hook_commands.hook_command(command, self.adapter.name, timeout)
            points[name] = point
        return points

    def render(self, points: Mapping[str, Mapping[str, Any]]) -> str:
        """The plugin's text with ``points`` as its configuration."""
        config = json.dumps({"cli": self.adapter.name, "points": points}, indent=2)
        return plugin_source().replace(CLI_SLOT, self.adapter.name).replace(CONFIG_SLOT, config)

    def install(
        self,
        path: Path,
        *,
        events: Iterable[str] | None = None,
        command: str | None = None,
        mode: Mode = "command",
        url: str | None = None,
        dry_run: bool = False,
    ) -> Change:
        """Write hookbus's plugin to ``path`` (an existing file must be hookbus's own)."""
        before = _read(path)
        if before is not None and not is_ours(before):
            raise SettingsFileError(path, "exists and was not written by hookbus")
        points = self.points(events, command=command or hookbus_command(), mode=mode, url=url or "")
        old = config_of(before) if before is not None else {}
        change = Change(
            path,
            before,
            self.render(points),
            tuple(name for name in points if name not in old),
            tuple(name for name in old if name not in points),
        )
        if not dry_run and change.changed:
            _write(path, change.after)
        return change

    def uninstall(self, path: Path, *, dry_run: bool = False) -> Change:
        """Delete hookbus's plugin at ``path`` (a file that is not hookbus's stays)."""
        before = _read(path)
        if before is None or not is_ours(before):
            return Change(path, before, before or "", (), ())
        change = Change(path, before, "", (), tuple(config_of(before)))
        if not dry_run:
            path.unlink()
            with contextlib.suppress(OSError):  # a plugin folder left empty goes too
                path.parent.rmdir()
        return change

    def entries(self, path: Path) -> list[tuple[str, Mapping[str, Any]]]:
        """hookbus's hook points in the plugin at ``path`` (``hookbus doctor``): the guards
        fail closed in the plugin itself."""
        text = _read(path)
        if text is None or not is_ours(text):
            return []
        found: list[tuple[str, Mapping[str, Any]]] = []
        for name, point in config_of(text).items():
            entry: dict[str, Any] = {"type": "plugin", "failsClosed": bool(point.get("guard"))}
            if "command" in point:
                entry["command"] = point["command"]
            found.append((name, entry))
        return found

    def check_loads(self, path: Path, environ: Mapping[str, str]) -> str:
        """Load the plugin at ``path`` with the CLI's runtime, else node; what it was
        checked with, or why it could not be. PluginLoadError when it does not load."""
        text = _read(path)
        points = config_of(text) if text is not None else {}
        env = dict(environ, PLUGIN_FILE_TO_CHECK=str(path))
        env["PLUGIN_HOOKS_TO_CHECK"] = json.dumps(_hooks_of(points))
        runtime = shutil.which(self.adapter.binary, path=environ.get("PATH"))
        if runtime is not None:
            env["BUN_BE_BUN"] = "1"
        else:
            runtime = shutil.which("node", path=environ.get("PATH"))
        if runtime is None:
            return f"not checked: neither {self.adapter.binary} nor node is on PATH"
        try:
            done = subprocess.run(
                [runtime, "-e", PROBE],
                env=env,
                cwd=path.parent,
                capture_output=True,
                text=True,
                timeout=LOAD_CHECK_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PluginLoadError(path, runtime, str(exc)) from exc
        if done.returncode != 0 or LOADED not in done.stdout:
            detail = " ".join((done.stderr or done.stdout).split())[-600:]
            raise PluginLoadError(path, runtime, detail or f"exit {done.returncode}")
        return f"loads with {runtime}"

    def load_problem(self, path: Path, path_var: str) -> str | None:
        """For ``hookbus doctor``: why the CLI would skip hookbus's plugin at ``path``
        without a word (it does not load with the runtime found on ``path_var``)."""
        if not is_ours(_read(path) or ""):
            return None
        try:
            self.check_loads(path, dict(os.environ, PATH=path_var))
        except PluginLoadError as exc:
            return f"{self.label} skips {path} without a word: {exc.detail} (re-run install)"
        return None

    def installer(self) -> table.Installer:
        """This CLI's row of the installer table."""
        return table.Installer(
            scopes={scope: where for scope, where in self.adapter.settings.items()},
            settings_path=lambda scope, root: self.settings_path(scope),
            install=self._install_call,
            uninstall=self._uninstall_call,
            file_kind="plugin file",
            entries=self.entries,
            load_problem=self.load_problem,
        )

    def _install_call(
        self, path: Path, *, scope: str | None, dry_run: bool, root: Path | None = None, **kw: Any
    ) -> table.Outcome:
        change = self.install(path, dry_run=dry_run, **kw)
        if dry_run:
            return table.single(change)
        try:
            checked = self.check_loads(path, os.environ)
        except PluginLoadError:
            _restore(path, change.before)
            raise
        extra = {"load_check": checked}
        if checked.startswith("not checked"):
            extra["warning"] = f"{path}: {checked}; {self.label} skips a plugin that fails to load"
        return table.single(change, extra)

    def _uninstall_call(
        self, path: Path, *, scope: str | None, dry_run: bool, root: Path | None = None
    ) -> table.Outcome:
        return table.single(self.uninstall(path, dry_run=dry_run))


def is_ours(text: str) -> bool:
    """Whether a plugin file's text is one hookbus wrote (its configuration block)."""
    return CONFIG_START in text and CONFIG_END in text


def config_of(text: str | None) -> dict[str, dict[str, Any]]:
    """The hook points of a plugin hookbus wrote; SettingsFileError-free: {} if unreadable."""
    if text is None or not is_ours(text):
        return {}
    block = text.partition(CONFIG_START)[2].partition(CONFIG_END)[0]
    try:
        data = json.loads(block)
    except ValueError:
        return {}
    points = data.get("points") if isinstance(data, dict) else None
    return points if isinstance(points, dict) else {}


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsFileError(path, f"cannot be read ({exc})") from exc


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a half-written plugin would fail to load)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _restore(path: Path, before: str | None) -> None:
    """Put ``path`` back as it was before a failed install."""
    if before is None:
        path.unlink(missing_ok=True)
    else:
        _write(path, before)


#: OpenCode's plugin file, install and uninstall.
PLUGIN = PluginFile(ADAPTER, label="OpenCode")
INSTALLER = PLUGIN.installer()
