"""``hookbus codex install`` / ``uninstall``: Codex's config.toml hook entries, trusted.

Codex declares hooks inline in ``config.toml``::

    [[hooks.PreToolUse]]
    [[hooks.PreToolUse.hooks]]
    type = "command"
    command = "<hookbus> codex hook --timeout 10 || printf ..."
    timeout = 10

and runs a non-managed hook only once it is *trusted*: ``/hooks`` records
``[hooks.state."<config path>:<event_label>:<group>:<handler>"] trusted_hash =
"sha256:<hex>"``, the SHA-256 of the compact, key-sorted JSON of the hook's normalised
identity (``event_name`` in snake case, ``matcher`` when set, and the handlers with
``async: false``). Codex 0.169 skips an untrusted or changed hook silently, so the installer
writes that record for each entry it adds, exactly as ``/hooks`` would (the integration
test runs the real binary without ``--dangerously-bypass-hook-trust``).

The file is edited with tomlkit, so comments, order and every other table stay as they
were. Idempotent; a backup (``config.toml.hookbus-backup``) before a change; ``--dry-run``;
``uninstall`` removes exactly our groups and their trust records, and renumbers the trust
records of the groups that follow ours in the same event (their key holds their index).
The guards' commands end with a shell fallback that prints a deny when hookbus did not exit
0 (Codex lets the tool run on any other exit or a timeout). ``--scope managed`` writes
``/etc/codex/requirements.toml`` instead, whose hooks Codex runs with no trust step. The
trust records themselves: :mod:`hookbus.harnesses.install.codex_trust`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import tomlkit
from tomlkit.items import AoT

from hookbus.harnesses.adapters import Route, unavailable_reason
from hookbus.harnesses.codex_adapter import ADAPTER, NAME, SETTINGS, deny
from hookbus.harnesses.install import hook_commands, table
from hookbus.harnesses.install.claude_code import hookbus_command
from hookbus.harnesses.install.codex_trust import (
    STATE,
    hookbus_groups,
    read_toml,
    trust_hash,
    trust_key,
    untrusted_events,
)
from hookbus.harnesses.install.codex_trust import event_label as event_label
from hookbus.harnesses.install.settings_file import Change, write_change
from hookbus.harnesses.install.table import InstallError

Scope = Literal["user", "project", "managed"]
Mode = Literal["command", "http"]

#: Timeout of a hook entry, in seconds (the command's deadline stays 0.5 s under it).
ENTRY_TIMEOUT_S = 10
#: Codex clamps these events' hooks to 3 s.
SHORT_EVENTS = frozenset({"SessionEnd", "Interrupt"})
SHORT_TIMEOUT_S = 3
#: Codex's managed requirements on Linux: hooks there run for every user, with no trust
#: step (tried with 0.169: an inline ``[[hooks.PreToolUse]]`` there blocks a call).
MANAGED_REQUIREMENTS = "/etc/codex/requirements.toml"
#: The requirements key that makes Codex run managed hooks only.
MANAGED_HOOKS_ONLY = "allow_managed_hooks_only"


def installable_events() -> list[str]:
    return table.installable_events(ADAPTER)


def settings_path(
    scope: Scope, *, home: Path | None = None, project: Path | None = None, root: Path | None = None
) -> Path:
    """config.toml of ``scope``: user (``$CODEX_HOME``, else ``~/.codex``) or project; for
    managed, the requirements file (``/etc/codex``, under ``root`` when given)."""
    if scope == "managed":
        return table.rooted(MANAGED_REQUIREMENTS, root)
    if scope == "user" and home is None and os.environ.get("CODEX_HOME"):
        return Path(os.environ["CODEX_HOME"]) / "config.toml"
    return table.home_path(SETTINGS[scope], home, project)


def _down(route: Route) -> dict[str, Any]:
    return deny(route.name, unavailable_reason(f"hookbus {NAME} hook could not run"))


def entry_for(event: str, *, command: str, mode: Mode = "command", url: str = "") -> dict[str, Any]:
    """The handler hookbus writes for ``event``: the lean command, or in ``http`` mode a
    ``curl`` to the gateway (:mod:`hookbus.harnesses.install.hook_commands`)."""
    line, timeout = hook_commands.shell_entry(
        ADAPTER.route(event),
        SHORT_TIMEOUT_S if event in SHORT_EVENTS else ENTRY_TIMEOUT_S,
        cli=NAME,
        mode=mode,
        command=command,
        url=url,
        down=_down,
    )
    return {"type": "command", "command": line, "timeout": timeout}


def is_ours(entry: Mapping[str, Any]) -> bool:
    return hook_commands.entry_calls_hookbus(entry, "command", NAME)


def _state(doc: tomlkit.TOMLDocument, *, create: bool) -> Any:
    """The ``[hooks.state]`` table of ``doc`` (created when asked), else None."""
    hooks = doc.get("hooks")
    if hooks is None:
        if not create:
            return None
        hooks = tomlkit.table(is_super_table=True)
        doc["hooks"] = hooks
    state = hooks.get(STATE)
    if state is None and create:
        state = tomlkit.table(is_super_table=True)
        hooks[STATE] = state
    return state


def _prune(doc: tomlkit.TOMLDocument) -> None:
    hooks = doc.get("hooks")
    if isinstance(hooks, dict):
        if isinstance(hooks.get(STATE), dict) and not hooks[STATE]:
            del hooks[STATE]
        if not hooks:
            del doc["hooks"]


def _strip(path: Path, hooks: dict[str, Any], state: Any) -> list[str]:
    """Take our groups out of ``hooks`` (and their trust records out of ``state``),
    renumbering the trust records of the groups after them; the events touched."""
    touched: list[str] = []
    for event in [e for e in hooks if e != STATE]:
        groups = hooks.get(event)
        if not isinstance(groups, list):
            continue
        keep = [
            i
            for i, g in enumerate(groups)
            if not any(isinstance(h, dict) and is_ours(h) for h in g.get("hooks", []))
        ]
        if len(keep) == len(groups):
            continue
        touched.append(event)
        if isinstance(state, dict):
            moved: dict[str, Any] = {}
            for i, group in enumerate(groups):
                for h in range(len(group.get("hooks", [])) or 1):
                    record = state.pop(trust_key(path, event, i, h), None)
                    if record is not None and i in keep:
                        moved[trust_key(path, event, keep.index(i), h)] = record
            for key, record in moved.items():
                state[key] = record
        for i in reversed(range(len(groups))):
            if i not in keep:
                del groups[i]
        if not groups:
            del hooks[event]
    return touched


def _edit(
    path: Path,
    doc: tomlkit.TOMLDocument,
    trust_doc: tomlkit.TOMLDocument,
    wanted: Mapping[str, dict[str, Any]],
    trusted: bool = True,
) -> None:
    hooks = doc.get("hooks")
    if hooks is None:
        hooks = tomlkit.table(is_super_table=True)
        doc["hooks"] = hooks
    _strip(path, hooks, _state(trust_doc, create=False))
    records: dict[str, str] = {}
    for event, entry in wanted.items():
        groups = hooks.get(event)
        if groups is None:
            groups = AoT([])
            hooks[event] = groups
        handlers = AoT([tomlkit.table()])
        handlers[0].update(entry)
        group = tomlkit.table()
        group["hooks"] = handlers
        groups.append(group)
        if trusted:
            records[trust_key(path, event, len(groups) - 1)] = trust_hash(event, [entry])
    if records:
        state = _state(trust_doc, create=True)
        for key, value in records.items():
            record = tomlkit.table()
            record["trusted_hash"] = value
            state[key] = record
    _prune(doc)
    if trust_doc is not doc:
        _prune(trust_doc)


def _write(path: Path, doc: tomlkit.TOMLDocument, before: str | None, dry_run: bool) -> Change:
    after = tomlkit.dumps(doc)
    if after.endswith("\n\n"):  # a removed table leaves its blank line behind
        after = after.rstrip("\n") + "\n"
    if before is not None and tomlkit.parse(before) == tomlkit.parse(after):
        after = before
    added, removed = _diff_events(tomlkit.parse(before or ""), tomlkit.parse(after))
    change = Change(path, before, after, tuple(added), tuple(removed))
    if dry_run or not change.changed:
        return change
    write_change(change)
    return change


def _ours_by_event(doc: Mapping[str, Any]) -> dict[str, list[Any]]:
    hooks = doc.get("hooks") or {}
    return {
        event: [h for g in groups for h in g.get("hooks", []) if is_ours(h)]
        for event, groups in hooks.items()
        if event != STATE and isinstance(groups, list)
    }


def _diff_events(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    before, after = _ours_by_event(old), _ours_by_event(new)
    added = [e for e, hs in after.items() if hs and hs != before.get(e)]
    removed = [e for e, hs in before.items() if hs and not after.get(e)]
    return added, removed


class Changes:
    """An install / uninstall of Codex: the hooks file's change and, when the trust records
    live in another file (a project's hooks, trusted in the user's config), that one's."""

    def __init__(self, hooks: Change, trust: Change | None = None) -> None:
        self.hooks = hooks
        self.trust = trust

    @property
    def all(self) -> tuple[Change, ...]:
        return (self.hooks,) if self.trust is None else (self.hooks, self.trust)

    @property
    def path(self) -> Path:
        return self.hooks.path

    @property
    def changed(self) -> bool:
        return any(c.changed for c in self.all)

    @property
    def added(self) -> tuple[str, ...]:
        return self.hooks.added

    @property
    def removed(self) -> tuple[str, ...]:
        return self.hooks.removed

    def diff(self) -> str:
        return "".join(c.diff() for c in self.all)


def _run(
    path: Path,
    trust_file: Path | None,
    dry_run: bool,
    edit: Callable[[tomlkit.TOMLDocument, tomlkit.TOMLDocument], None],
) -> Changes:
    before, doc = read_toml(path)
    separate = trust_file is not None and os.path.abspath(trust_file) != os.path.abspath(path)
    if separate:
        assert trust_file is not None
        trust_before, trust_doc = read_toml(trust_file)
    else:
        trust_before, trust_doc = before, doc
    edit(doc, trust_doc)
    hooks_change = _write(path, doc, before, dry_run)
    if not separate:
        return Changes(hooks_change)
    assert trust_file is not None
    return Changes(hooks_change, _write(trust_file, trust_doc, trust_before, dry_run))


def install(
    path: Path,
    *,
    events: Iterable[str] | None = None,
    command: str | None = None,
    mode: Mode = "command",
    url: str | None = None,
    trust_file: Path | None = None,
    trusted: bool = True,
    managed_hooks_only: bool | None = None,
    dry_run: bool = False,
) -> Changes:
    """Add hookbus's entries to ``path``, their trust records to ``trust_file`` (default
    ``path`` itself; Codex reads a project's trust records from the user's config only);
    everything else stays. ``trusted=False`` writes no trust records (managed
    requirements, which Codex runs untrusted); ``managed_hooks_only`` sets
    ``allow_managed_hooks_only`` there (None: left as it is)."""
    chosen = installable_events() if events is None else list(events)
    for event in chosen:
        if event not in ADAPTER.routes:
            known = ", ".join(installable_events())
            raise InstallError(event, f"not a Codex event; choose from {known}")
    hookbus = command or hookbus_command()
    wanted = {
        event: entry_for(event, command=hookbus, mode=mode, url=url or "") for event in chosen
    }

    def edit(doc: tomlkit.TOMLDocument, trust: tomlkit.TOMLDocument) -> None:
        if managed_hooks_only is not None:
            doc[MANAGED_HOOKS_ONLY] = managed_hooks_only
        _edit(path, doc, trust, wanted, trusted)

    return _run(path, trust_file, dry_run, edit)


def uninstall(path: Path, *, trust_file: Path | None = None, dry_run: bool = False) -> Changes:
    """Remove exactly hookbus's groups from ``path`` and their trust records."""

    def edit(doc: tomlkit.TOMLDocument, trust_doc: tomlkit.TOMLDocument) -> None:
        hooks = doc.get("hooks")
        if isinstance(hooks, dict):
            _strip(path, hooks, _state(trust_doc, create=False))
        _prune(doc)
        if trust_doc is not doc:
            _prune(trust_doc)

    return _run(path, trust_file, dry_run, edit)


def _entries(path: Path) -> list[tuple[str, Mapping[str, Any]]]:
    return [(event, entry) for event, _, entry in hookbus_groups(path, is_ours)]


def untrusted(path: Path, scope: str) -> list[str]:
    """The events whose hookbus group in ``path`` Codex would skip as untrusted; managed
    hooks need no trust record."""
    if scope == table.MANAGED:
        return []
    return untrusted_events(path, _trust(scope, None) or path, is_ours)


def _path(scope: str, root: Path | None) -> Path:
    return settings_path(scope, root=root)  # type: ignore[arg-type]


def _trust(scope: str | None, trust_file: Path | None) -> Path | None:
    """Codex reads trust records from the user's config only: a project's hooks are
    trusted there; a user config (or an explicit --settings) holds its own."""
    if trust_file is not None:
        return trust_file
    if scope == "project":
        return settings_path("user")
    return None


def _outcome(changes: Changes, scope: str | None) -> table.Outcome:
    if scope == table.MANAGED:  # managed hooks need no trust records
        return table.Outcome(changes.all)
    trust = changes.trust.path if changes.trust else changes.path
    return table.Outcome(changes.all, {"trust_file": str(trust)})


def _install(
    path: Path,
    *,
    scope: str | None,
    dry_run: bool,
    root: Path | None = None,
    trust_file: Path | None = None,
    allow_managed_hooks_only: bool | None = None,
    **options: Any,
) -> table.Outcome:
    managed = scope == table.MANAGED
    if allow_managed_hooks_only is not None and not managed:
        raise InstallError(
            "--allow-managed-hooks-only", "it is a managed requirement: use --scope managed"
        )
    changes = install(
        path,
        trust_file=None if managed else _trust(scope, trust_file),
        trusted=not managed,
        managed_hooks_only=allow_managed_hooks_only,
        dry_run=dry_run,
        **options,
    )
    return table.readable_when_managed(_outcome(changes, scope), scope, dry_run)


def _uninstall(
    path: Path,
    *,
    scope: str | None,
    dry_run: bool,
    root: Path | None = None,
    trust_file: Path | None = None,
) -> table.Outcome:
    trust = None if scope == table.MANAGED else _trust(scope, trust_file)
    return _outcome(uninstall(path, trust_file=trust, dry_run=dry_run), scope)


INSTALLER = table.Installer(
    scopes={
        "user": "$CODEX_HOME/config.toml, else ~/.codex/config.toml",
        "project": SETTINGS["project"],
        "managed": f"{MANAGED_REQUIREMENTS}: managed hooks, no trust step",
    },
    settings_path=_path,
    install=_install,
    uninstall=_uninstall,
    entries=lambda path: _entries(path),
    untrusted=lambda path, scope: untrusted(path, scope),
    file_kind="config.toml",
    options=(
        table.ExtraOption(
            "trust_file",
            "--trust-file",
            kind=Path,
            help="The config.toml that gets the trust records (default: the user's for "
            "--scope project, else the edited file itself).",
            commands=("install", "uninstall"),
        ),
        table.ExtraOption(
            "allow_managed_hooks_only",
            "--allow-managed-hooks-only/--no-allow-managed-hooks-only",
            kind=bool,
            help="--scope managed: set allow_managed_hooks_only in requirements.toml (only "
            "managed hooks run); left as it is when not given.",
        ),
    ),
)
