"""``hookbus doctor``: is each agent CLI on this machine guarded by the fleet, and how not?

For each CLI of the adapter table found on PATH (or named), it reports:

* its version against the versions hookbus was tried with (the row's ``tried``), and what
  still fails open in it (the row's ``fails_open``; before Claude Code's ``onFailure``
  arrived, a hookbus that cannot start lets every call through);
* hookbus's hooks in each scope of its installer (user, project, local, managed): which
  events, whether every guard event is there, whether each guard fails closed (``onFailure:
  "block"`` where the CLI has it, else the installer's ``|| printf '<deny JSON>'``, or a
  plugin entry marked ``failsClosed``: the plugin blocks by itself), whether
  Codex would skip an entry as untrusted, whether OpenCode or Kilo CLI would skip hookbus's
  plugin as not loading, and whether the hook command resolves to this hookbus;
* whether Redis and a live chain worker answer from the hook's own environment: the one the
  CLI hands its hooks (Gemini CLI with ``GITHUB_SHA`` set strips it to PATH and HOME, so the
  fleet must be named in a hookbus.toml there).

Findings are ``fails_open`` (a guard would let a call through: exit 1), ``blocks`` (the
guards would deny every call: exit 69) or ``note``. Heartbeats are judged on Redis's clock.
"""

from __future__ import annotations

import importlib
import os
import shlex
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hookbus.bus import keys
from hookbus.bus.policy.liveness import alive_from_heartbeats, redis_ms
from hookbus.bus.resp import RespConnection
from hookbus.errors import HookBusError
from hookbus.harnesses.adapters import Adapter, adapter, names
from hookbus.harnesses.install.claude_code import hookbus_command
from hookbus.harnesses.install.settings_file import SettingsFileError
from hookbus.harnesses.install.table import (
    MANAGED,
    Installer,
    cli_version,
    installable_events,
    version_tuple,
)

#: Severity of a finding: a guard would let a call through.
FAILS_OPEN = "fails_open"
#: Severity of a finding: the guards would deny every call (nothing fails open).
BLOCKS = "blocks"
NOTE = "note"
#: Exit codes of ``hookbus doctor``.
EXIT_HEALTHY = 0
EXIT_FAILS_OPEN = 1
EXIT_BLOCKS = 69
#: Seconds the fleet check may take.
FLEET_TIMEOUT_S = 3.0
#: What Gemini CLI passes a hook when ``GITHUB_SHA`` is set.
STRIPPED_ENVIRONMENT = ("PATH", "HOME")


@dataclass
class Finding:
    severity: str
    message: str


@dataclass
class ScopeReport:
    """hookbus's entries in one scope's file."""

    scope: str
    path: str
    events: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


@dataclass
class FleetReport:
    """Redis and a chain worker, as the hook would reach them."""

    environment: str
    redis_url: str = ""
    namespace: str = ""
    redis: bool = False
    chain_worker: bool = False
    detail: str = ""


@dataclass
class CliReport:
    name: str
    label: str
    binary: str | None
    version: str | None
    tried: list[str]
    version_tried: bool | None
    fails_open_in_version: list[str]
    scopes: list[ScopeReport] = field(default_factory=list)
    fleet: FleetReport | None = None
    findings: list[Finding] = field(default_factory=list)

    def all_findings(self) -> list[Finding]:
        return [*self.findings, *(f for s in self.scopes for f in s.findings)]


@dataclass
class Report:
    clis: list[CliReport]
    not_found: list[str]
    #: The fleet as this shell reaches it: with no agent CLI found, still the answer to
    #: "would a guard installed here be decided, and by which fleet?".
    fleet: FleetReport | None = None

    @property
    def exit_code(self) -> int:
        if not self.clis and self.fleet is not None and not self.fleet.chain_worker:
            return EXIT_BLOCKS
        severities = {f.severity for c in self.clis for f in c.all_findings()}
        if FAILS_OPEN in severities:
            return EXIT_FAILS_OPEN
        if BLOCKS in severities:
            return EXIT_BLOCKS
        return EXIT_HEALTHY

    def as_dict(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, **asdict(self)}


def _command_of(entry: Mapping[str, Any]) -> str | None:
    value = entry.get("command", entry.get("bash"))
    return value if isinstance(value, str) else None


def _resolve(command: str, path_var: str) -> tuple[str | None, str]:
    """The executable a hook command runs (the part before ``||``) and its first word."""
    head = command.split("||", 1)[0]
    try:
        argv = shlex.split(head)
    except ValueError:
        return None, head
    if not argv:
        return None, head
    word = argv[0]
    if os.sep in word:
        return (word if os.access(word, os.X_OK) else None), word
    return shutil.which(word, path=path_var), word


def _this_hookbus() -> str:
    return shlex.split(hookbus_command())[0]


def _check_entry(
    row: Adapter, event: str, entry: Mapping[str, Any], path_var: str
) -> list[Finding]:
    """What is wrong with one hookbus entry: a guard that fails open, a command that does
    not run this hookbus."""
    found: list[Finding] = []
    guard = row.route(event).guard
    command = _command_of(entry)
    if guard:
        if row.on_failure_since is not None and entry.get("type") in ("command", "http"):
            if entry.get("onFailure") != "block":
                found.append(
                    Finding(
                        FAILS_OPEN,
                        f'{event}: no "onFailure": "block": a hookbus that cannot start or '
                        "answer lets the call run (re-run install)",
                    )
                )
        elif command is not None and "|| printf " not in command and not entry.get("failsClosed"):
            found.append(
                Finding(
                    FAILS_OPEN,
                    f"{event}: no shell fallback that denies when hookbus does not exit 0 "
                    "(re-run install)",
                )
            )
    if command is None or command.startswith("curl "):
        return found
    resolved, word = _resolve(command, path_var)
    if resolved is None:
        found.append(
            Finding(
                BLOCKS if guard else NOTE,
                f"{event}: {word!r} does not resolve to an executable from the hook's PATH"
                + ("; every guarded call is denied" if guard else ""),
            )
        )
    elif os.path.realpath(resolved) != os.path.realpath(shutil.which(_this_hookbus()) or ""):
        found.append(Finding(NOTE, f"{event}: runs {resolved}, not this hookbus"))
    return found


def check_scope(
    row: Adapter,
    installer: Installer,
    scope: str,
    path: Path,
    path_var: str,
    version: str | None = None,
) -> ScopeReport:
    """hookbus's entries in one scope's file, and what is wrong with them (``version``: the
    CLI's, which decides the guard events it sends)."""
    report = ScopeReport(scope, str(path))
    if not path.exists():  # a settings file, or a hooks folder (Cline)
        return report
    try:
        entries = installer.entries(path)
    except SettingsFileError as exc:
        report.findings.append(Finding(NOTE, str(exc)))
        return report
    report.events = sorted({event for event, _ in entries})
    if not entries:
        return report
    guards = [name for name in installable_events(row, version) if row.routes[name].guard]
    missing = [g for g in guards if g not in report.events]
    if missing:
        report.findings.append(
            Finding(FAILS_OPEN, f"guard event(s) not installed: {', '.join(missing)}")
        )
    for event, entry in entries:
        report.findings.extend(_check_entry(row, event, entry, path_var))
    if installer.load_problem is not None:
        problem = installer.load_problem(path, path_var)
        if problem is not None:
            report.findings.append(Finding(FAILS_OPEN, problem))
    if installer.untrusted is not None:
        skipped = installer.untrusted(path, scope)
        if skipped:
            report.findings.append(
                Finding(
                    FAILS_OPEN,
                    f"{row.label} skips these untrusted hooks silently: {', '.join(skipped)} "
                    "(re-run install, or trust them in /hooks)",
                )
            )
    return report


def hook_environment(row: Adapter, environ: Mapping[str, str]) -> tuple[dict[str, str], str]:
    """The environment the CLI hands its hooks, and how it was made."""
    if row.name == "gemini-cli" and environ.get("GITHUB_SHA"):
        stripped = {k: environ[k] for k in STRIPPED_ENVIRONMENT if k in environ}
        return stripped, "stripped to PATH and HOME (GITHUB_SHA is set)"
    return dict(environ), "as given"


def check_fleet(row: Adapter, environ: Mapping[str, str], cwd: str) -> FleetReport:
    """Whether Redis and a live chain worker answer from the hook's own environment."""
    env, how = hook_environment(row, environ)
    return fleet_from(env, how, cwd)


def fleet_from(env: Mapping[str, str], how: str, cwd: str) -> FleetReport:
    """Whether Redis and a live chain worker answer to a process with environment ``env``
    started in ``cwd``; ``how`` says whose environment that is."""
    from hookbus.harnesses.lean.config import load

    report = FleetReport(how)
    try:
        # every entry point finds the configuration the same way, the user's file included
        cfg = load(env, cwd)
        report.redis_url, report.namespace = cfg.redis_url, cfg.namespace
        with RespConnection(cfg.redis_url) as conn:
            workers, now = conn.pipeline(
                [("HGETALL", keys.workers(cfg.namespace)), ("TIME",)],
                deadline=time.monotonic() + FLEET_TIMEOUT_S,
            )
        report.redis = not isinstance(workers, Exception)
        report.chain_worker = report.redis and alive_from_heartbeats(
            workers, cfg.dead_after_ms, redis_ms(now)
        )
        if not report.chain_worker:
            report.detail = f"no chain worker alive in namespace {cfg.namespace!r}"
    except (HookBusError, OSError, ValueError) as exc:
        report.detail = str(exc)
    return report


def version_fails_open(row: Adapter, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """(binary, version) when the CLI on ``environ``'s PATH is older than the version that
    honours the entries' ``onFailure`` (the row's ``on_failure_since``); None otherwise, and
    when it is not on PATH or does not say its version (then nothing is known to refuse)."""
    since = version_tuple(row.on_failure_since or "")
    binary = shutil.which(row.binary, path=environ.get("PATH")) if since else None
    version = cli_version(binary) if binary else None
    current = version_tuple(version or "")
    if binary and version and since and current and current < since:
        return binary, version
    return None


def check_cli(
    row: Adapter,
    *,
    environ: Mapping[str, str],
    cwd: Path,
    root: Path | None,
    named: bool,
) -> CliReport | None:
    """One CLI's report; None when it is neither on PATH nor named."""
    binary = shutil.which(row.binary, path=environ.get("PATH"))
    if binary is None and not named:
        return None
    version = cli_version(binary) if binary else None
    tried = list(row.tried)
    report = CliReport(
        name=row.name,
        label=row.label,
        binary=binary,
        version=version,
        tried=tried,
        version_tried=(version in tried) if version else None,
        fails_open_in_version=list(row.fails_open),
    )
    if binary is None:
        report.findings.append(Finding(NOTE, f"{row.binary} is not on PATH"))
    elif version is None:
        report.findings.append(Finding(NOTE, f"{row.binary} --version said no version"))
    elif not report.version_tried:
        report.findings.append(
            Finding(NOTE, f"{version} was not tried with hookbus (tried: {', '.join(tried)})")
        )
    since = version_tuple(row.on_failure_since or "")
    current = version_tuple(version or "")
    if since and current and current < since:
        report.findings.append(
            Finding(
                FAILS_OPEN,
                f"{row.label} {version} has no onFailure (since {row.on_failure_since}): a "
                "hookbus that cannot start lets every guarded call run",
            )
        )
    installer: Installer = importlib.import_module(row.installer).INSTALLER
    path_var = environ.get("PATH", os.defpath)
    for scope in installer.scopes:
        path = installer.settings_path(scope, root if scope == MANAGED else None)
        report.scopes.append(check_scope(row, installer, scope, path, path_var, version))
    if not any(s.events for s in report.scopes):
        report.findings.append(
            Finding(
                FAILS_OPEN,
                f"hookbus is not installed in any scope: {row.label} runs unguarded "
                f"(hookbus {row.name} install)",
            )
        )
    report.fleet = check_fleet(row, environ, str(cwd))
    if not report.fleet.chain_worker:
        report.findings.append(
            Finding(
                BLOCKS,
                "the fleet does not answer from the hook's environment "
                f"({report.fleet.detail}): every guarded call is denied",
            )
        )
    return report


def diagnose(
    clis: Sequence[str] = (),
    *,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    root: Path | None = None,
) -> Report:
    """The report for ``clis`` (adapter names; default: every CLI found on PATH)."""
    env = dict(os.environ if environ is None else environ)
    wanted = list(clis) or names()
    for name in wanted:
        adapter(name)  # KeyError names the known ones
    reports, not_found = [], []
    for name in wanted:
        found = check_cli(
            adapter(name), environ=env, cwd=cwd or Path.cwd(), root=root, named=bool(clis)
        )
        if found is None:
            not_found.append(name)
        else:
            reports.append(found)
    here = str(cwd or Path.cwd())
    return Report(reports, not_found, fleet_from(env, "this shell's", here))
