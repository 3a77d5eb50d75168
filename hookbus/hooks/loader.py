"""Load a hooks folder: every hook it can, and a report of the rest.

A broken file never fails the whole load: a malformed HOOK.toml is skipped with a
warning. What could not be loaded is a :class:`Problem` naming the file, the field and the
reason: bad manifests, duplicate names, two manifests in one folder, unmet ``requires``
(os / bins / env), handler files that do not exist. What loads but will misbehave is a
warning (:func:`deadline_warnings`: a blocking hook whose timeout outlasts the deadline of a
kind it serves); warnings never make a load fail.

Layout::

    hooks/<name>/HOOK.toml      primary form
    hooks/<name>/HOOK.md        MicroClaw form (YAML frontmatter)
    hooks/<name>.yaml           single-file YAML form (folder = hooks/)

Hooks are returned in name order, which is the registration order that breaks priority ties.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from hookbus.bus.kinds import DEFAULT_CATALOGUE, Catalogue
from hookbus.errors import ManifestError
from hookbus.hooks.actions.kinds import action_kind
from hookbus.hooks.manifest import (
    MARKDOWN_FILENAME,
    TOML_FILENAME,
    YAML_SUFFIXES,
    HookManifest,
    load_manifest,
)

logger = logging.getLogger(__name__)

_IGNORED_DIRS = frozenset({"__pycache__", "node_modules"})


@dataclass(frozen=True, slots=True)
class Problem:
    """Why one file or hook was not loaded. ``str(p)`` is ``"path: field: reason"``."""

    path: str
    field: str | None
    reason: str
    hook: str | None = None

    def __str__(self) -> str:
        where = f"{self.path}: {self.field}" if self.field else self.path
        return f"{where}: {self.reason}"

    @classmethod
    def from_error(cls, exc: ManifestError, hook: str | None = None) -> Problem:
        return cls(path=exc.path, field=exc.field, reason=exc.reason, hook=hook)


@dataclass
class LoadReport:
    """The result of a load: the hooks (name order, disabled included) and the problems."""

    hooks_dir: Path
    hooks: list[HookManifest] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: what loads but will misbehave (see :func:`deadline_warnings`); ``ok`` ignores them
    warnings: list[Problem] = field(default_factory=list)
    #: manifests that parsed but cannot load here (``requires`` unmet, handler missing):
    #: a worker leaves each out alone and closes the kinds of those that are guards
    skipped: list[HookManifest] = field(default_factory=list)

    @property
    def enabled(self) -> list[HookManifest]:
        """The hooks that will run (``enabled = true``)."""
        return [h for h in self.hooks if h.enabled]

    @property
    def ok(self) -> bool:
        """True when nothing was wrong."""
        return not self.problems

    def get(self, name: str) -> HookManifest | None:
        for hook in self.hooks:
            if hook.name == name:
                return hook
        return None


def _candidates(hooks_dir: Path) -> tuple[list[Path], list[Problem]]:
    """The manifest files of a hooks folder, one per hook, in a stable order."""
    files: list[Path] = []
    problems: list[Problem] = []
    for entry in sorted(hooks_dir.iterdir(), key=lambda p: p.name):
        if entry.name.startswith((".", "_")) or entry.name in _IGNORED_DIRS:
            continue
        if entry.is_dir():
            toml_file = entry / TOML_FILENAME
            md_file = entry / MARKDOWN_FILENAME
            if toml_file.is_file():
                files.append(toml_file)
                if md_file.is_file():
                    problems.append(
                        Problem(
                            str(md_file),
                            None,
                            f"ignored: {TOML_FILENAME} in the same "
                            "folder takes precedence; delete one of them",
                            entry.name,
                        )
                    )
            elif md_file.is_file():
                files.append(md_file)
            else:
                problems.append(
                    Problem(
                        str(entry),
                        None,
                        f"no {TOML_FILENAME} or {MARKDOWN_FILENAME} in "
                        "this folder (create one with `hookbus hooks create`)",
                        entry.name,
                    )
                )
        elif entry.is_file() and entry.suffix in YAML_SUFFIXES:
            files.append(entry)
    return files, problems


def unmet_requirements(manifest: HookManifest) -> list[str]:
    """What of ``requires`` does not hold on this machine (empty when all is met)."""
    unmet: list[str] = []
    req = manifest.requires
    if req.os:
        here = _os_name()
        if here not in {o.lower() for o in req.os}:
            unmet.append(f"os {here} is not one of {', '.join(req.os)}")
    for binary in req.bins:
        if shutil.which(binary) is None:
            unmet.append(f"binary {binary!r} is not on PATH")
    for var in req.env:
        if var not in os.environ:
            unmet.append(f"environment variable {var} is not set")
    return unmet


def _os_name() -> str:
    if sys.platform.startswith("linux"):
        return "linux"
    if sys.platform == "darwin":
        return "darwin"
    if sys.platform.startswith(("win", "cygwin")):
        return "windows"
    return sys.platform


def handler_problems(manifest: HookManifest) -> list[Problem]:
    """Static checks of what a manifest's action points at (the action kind's own checks,
    e.g. that a shell command's file exists in the hook folder)."""
    return [
        Problem(str(manifest.source_path), where, problem, manifest.name)
        for where, problem in action_kind(manifest).check(manifest)
    ]


def deadline_warnings(
    manifests: Iterable[HookManifest],
    deadline_ms: Callable[[str], int],
    catalogue: Catalogue = DEFAULT_CATALOGUE,
) -> list[Problem]:
    """A warning per (hook, kind) where an enabled hook that may block has a timeout longer
    than the deadline of that kind's blocking requests (``deadline_ms(kind)``, e.g.
    :meth:`Settings.deadline_ms`). Such a hook is cut off at the deadline on every slow run
    and its ``on_error`` answers instead of it (the default timeout is 10 s, the default
    deadline 250 ms), which nobody notices unless told."""
    warnings: list[Problem] = []
    for manifest in manifests:
        if not manifest.enabled or manifest.blocking is False:
            continue
        if not action_kind(manifest).runs_code:
            continue  # no code runs: it cannot be slow
        timeout_ms = manifest.timeout_s * 1000
        for kind in manifest.events:
            spec = catalogue.get(kind)
            if spec is None:
                continue
            # A kind that is non-blocking by default (PostToolUse, Stop, ...) reaches this
            # hook as a request only when the hook says so (blocking = true); otherwise it
            # runs on the fan-out path, where the deadline does not apply.
            serves_requests = spec.blocking or (spec.may_block and manifest.blocking is True)
            if not serves_requests:
                continue
            limit = deadline_ms(spec.kind)
            if timeout_ms <= limit:
                continue
            warnings.append(
                Problem(
                    str(manifest.source_path),
                    "timeout_secs",
                    f"{manifest.timeout_s:g} s is longer than the {limit} ms deadline of "
                    f"blocking {spec.kind} requests: a run that slow is cut off at the "
                    f"deadline and its on_error ({manifest.on_error}) answers; set "
                    f"timeout_secs <= {limit / 1000:g}, or raise deadlines.{spec.kind}",
                    manifest.name,
                )
            )
    return warnings


def load_hooks(hooks_dir: Path, *, catalogue: Catalogue = DEFAULT_CATALOGUE) -> LoadReport:
    """Load every hook of ``hooks_dir``; never raises for a bad hook (see the report)."""
    hooks_dir = Path(hooks_dir)
    report = LoadReport(hooks_dir=hooks_dir)
    if not hooks_dir.is_dir():
        report.problems.append(
            Problem(
                str(hooks_dir),
                None,
                "hooks folder does not exist (create it, or set "
                "hooks_dir in hookbus.toml / HOOKBUS_HOOKS_DIR)",
            )
        )
        return report
    files, problems = _candidates(hooks_dir)
    report.problems.extend(problems)
    seen: dict[str, HookManifest] = {}
    for path in files:
        try:
            manifest = load_manifest(path, catalogue=catalogue)
        except ManifestError as exc:
            # a problem like the others (logged below): the CLI prints it, workers warn of it
            logger.debug("skipping hook: %s", exc)
            report.problems.append(Problem.from_error(exc, _guess_name(path)))
            continue
        if manifest.name in seen:
            other = seen[manifest.name].source_path
            report.problems.append(
                Problem(
                    str(path),
                    "name",
                    f"duplicate hook name {manifest.name!r} (also in {other}); rename one of them",
                    manifest.name,
                )
            )
            continue
        unmet = unmet_requirements(manifest)
        if unmet:
            report.problems.append(Problem(str(path), "requires", "; ".join(unmet), manifest.name))
            report.skipped.append(manifest)
            continue
        handler = handler_problems(manifest)
        if handler:
            report.problems.extend(handler)
            report.skipped.append(manifest)
            continue
        seen[manifest.name] = manifest
    report.hooks = sorted(seen.values(), key=lambda m: m.name)
    for problem in report.problems:
        logger.debug("hook problem: %s", problem)
    return report


def _guess_name(path: Path) -> str:
    if path.name in (TOML_FILENAME, MARKDOWN_FILENAME):
        return path.parent.name
    return path.stem


def validate_path(path: Path, catalogue: Catalogue = DEFAULT_CATALOGUE) -> LoadReport:
    """A report for a hooks folder, one hook folder, or one manifest file."""
    manifest_file: Path | None = None
    if path.is_file():
        manifest_file = path
    elif path.is_dir() and (path / TOML_FILENAME).is_file():
        manifest_file = path / TOML_FILENAME
    elif path.is_dir() and (path / MARKDOWN_FILENAME).is_file():
        manifest_file = path / MARKDOWN_FILENAME
    if manifest_file is None:
        return load_hooks(path, catalogue=catalogue)
    report = LoadReport(hooks_dir=manifest_file.parent)
    if manifest_file.name not in (TOML_FILENAME, MARKDOWN_FILENAME) and (
        manifest_file.suffix not in YAML_SUFFIXES
    ):
        report.problems.append(Problem(str(manifest_file), None, "not a hook manifest"))
        return report
    try:
        manifest = load_manifest(manifest_file, catalogue=catalogue)
    except ManifestError as exc:
        report.problems.append(Problem.from_error(exc))
        return report
    unmet = unmet_requirements(manifest)
    if unmet:
        report.problems.append(
            Problem(str(manifest_file), "requires", "; ".join(unmet), manifest.name)
        )
    report.problems.extend(handler_problems(manifest))
    if not report.problems:
        report.hooks.append(manifest)
    return report


#: How a worker words a hook it left out (it could not be built or loaded there). A worker
#: with a complete set keeps it instead; otherwise the rest of the set runs, and the kinds
#: the hook decided are answered by the failure policy (see kinds_left_out).
LEFT_OUT = "left out alone"


def is_guard(manifest: HookManifest) -> bool:
    """A guard: declared ``guard = true``, or an enforcing hook with ``on_error = "deny"``."""
    return manifest.guard or (manifest.on_error == "deny" and manifest.mode == "enforce")


def decides(manifest: HookManifest) -> bool:
    """Does leaving this hook out change the answers the bundle declares? A guard's does,
    and so does an operator's enforcing hook (deny, ask, halt, a modified input). A shadow
    hook's verdict is only recorded; an agent's hook that is not a guard acts on its author's
    own sessions: one that cannot be built must not turn every agent's answers degraded."""
    if manifest.mode != "enforce":
        return False
    return is_guard(manifest) or not manifest.agent_authored


def kinds_left_out(
    manifests: Iterable[HookManifest], left_out: Iterable[str]
) -> tuple[list[str], list[str]]:
    """The event kinds that lost a hook able to decide them, among the hooks named in
    ``left_out`` (they could not be built or loaded here): ``(guarded, decided)``. A
    guard's kinds are answered closed (denied, degraded); the other kinds an enforcing hook
    decided are answered by the kind's failure policy (degraded): without that hook the
    chain's answer is not the one the bundle declares, so it must not look like one."""
    names = set(left_out)
    guarded: set[str] = set()
    decided: set[str] = set()
    for manifest in manifests:
        if manifest.name not in names or not decides(manifest):
            continue
        (guarded if is_guard(manifest) else decided).update(manifest.events)
    return sorted(guarded), sorted(decided - guarded)
