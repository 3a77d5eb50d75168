"""What the console shows, read through the same library functions as the CLI.

Each function takes the settings (and the hooks folder where it matters), does its Redis
reads and returns plain data (dicts and lists) for a template or the JSON API. They are
synchronous: the app runs them in its thread pool. Redis errors arrive as
:class:`~hookbus.errors.HookBusError` (the app turns them into a "reconnecting" page).
"""

from __future__ import annotations

import difflib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hookbus.approvals.inbox import ApprovalInbox
from hookbus.bus.connection import bus_client, translated
from hookbus.bus.keys import Keys
from hookbus.console.decision_log import newest
from hookbus.errors import ApprovalUnconfirmed, HookNotFound

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

#: Most lines of a pending hook's diff shown.
DIFF_LINES = 400
#: Largest file a diff reads, in bytes.
DIFF_FILE_BYTES = 256 * 1024


def reachable(settings: Settings) -> None:
    """One PING, so that a Redis that is away fails a view at once
    (:class:`~hookbus.errors.RedisUnavailable`) instead of after the library's retries."""
    with translated(settings.effective_redis_url):
        bus_client(settings).ping()


def overview(settings: Settings) -> dict[str, Any]:
    """Workers (health, concurrency caps), partitions and lag, the bundle and its signature,
    degraded answers in the last minute, dead letters, pending approvals."""
    reachable(settings)
    from hookbus.workers.fleet import dead_letters
    from hookbus.workers.fleet.status import gather

    client = bus_client(settings)
    status = gather(client, settings, prune=False).to_dict()
    signed = None
    if status["bundle"]["version"]:
        from hookbus.bundles.store import fetch_meta

        with translated(settings.effective_redis_url):
            meta = fetch_meta(
                client, Keys.for_namespace(settings.namespace), status["bundle"]["version"]
            )
        if meta is not None:
            signed = getattr(meta, "key_id", "") or ("signed" if meta.signature else "")
    status["bundle"]["signature"] = signed or "unsigned"
    try:
        stream, jobs = dead_letters.count_dead_parts(client, settings)
        status["dead_letters"] = stream + jobs
        status["dead_letters_parts"] = {"stream": stream, "jobs": jobs}
    except Exception:  # the RQ Redis may be elsewhere and down: the overview still shows
        status["dead_letters"] = None
        status["dead_letters_parts"] = None
    since = int(time.time() * 1000) - 60_000
    status["degraded_per_minute"] = sum(
        1
        for partition in range(settings.partitions)
        for row in newest(settings, partition, since_ms=since)
        if row["degraded"]
    )
    status["pending_approvals"] = len(ApprovalInbox(settings).pending())
    status["partitions"] = settings.partitions
    return status


def approvals(settings: Settings, recent: int = 50) -> dict[str, Any]:
    """Pending approvals (oldest first) and the recently decided ones (newest first)."""
    inbox = ApprovalInbox(settings)
    return {
        "pending": [i.to_dict() for i in inbox.pending()],
        "recent": [i.to_dict() for i in inbox.recent(recent)],
    }


def hooks(settings: Settings, hooks_dir: Path) -> dict[str, Any]:
    """The current bundle's hooks, the agent-written hooks waiting for approval (with their
    audit findings and the diff against the approved version) and the change history."""
    from hookbus.authoring.pending import list_pending
    from hookbus.bundles import history
    from hookbus.bundles.store import current_version, fetch_meta

    reachable(settings)
    client = bus_client(settings)
    keys = Keys.for_namespace(settings.namespace)
    with translated(settings.effective_redis_url):
        version = current_version(client, keys)
        meta = fetch_meta(client, keys, version) if version else None
    entries = history.read(client, settings.namespace)
    pending = []
    for hook in list_pending(hooks_dir):
        pending.append(
            {
                "name": hook.name,
                "author": hook.author,
                "sha256": hook.sha256,
                "findings": _findings(hook.path, settings),
                **_review(hooks_dir / hook.name, hook.path),
                "replaces": (hooks_dir / hook.name).is_dir(),
            }
        )
    return {
        "hooks_dir": str(hooks_dir),
        "bundle": {
            "version": version,
            "hooks": list(meta.hooks) if meta else [],
            "who": meta.who if meta else None,
            "created_ms": meta.created_ms if meta else None,
            "signed": bool(meta and meta.signature),
        },
        "pending": pending,
        "history": [e.to_dict() for e in reversed(entries[-100:])],
    }


def _findings(folder: Path, settings: Settings) -> list[dict[str, Any]]:
    from hookbus.audit.folder import audit_folder

    try:
        report = audit_folder(folder, settings=settings)
    except Exception as exc:  # an unreadable hook is shown as such, not as a crash
        return [
            {
                "severity": "critical",
                "rule": "unreadable",
                "file": str(folder),
                "line": None,
                "message": str(exc),
            }
        ]
    return [f.to_dict() for f in report.findings]


def _review(current: Path, pending: Path) -> dict[str, Any]:
    """What the page shows to review a pending hook: its diff against the approved version,
    and whether that diff is whole (``reviewable``). A diff cut at :data:`DIFF_LINES`, or
    one that leaves out a file too large or not text, would hide lines that would run, so
    the page offers no Approve for it and the API refuses one."""
    text, whole = _diff(current, pending)
    return {"diff": text, "reviewable": whole}


def _diff(current: Path, pending: Path) -> tuple[str, bool]:
    """A unified diff of every file of the approved hook against the pending one, and
    whether it shows every line of the pending copy."""
    names = sorted(
        {p.relative_to(pending).as_posix() for p in pending.rglob("*") if p.is_file()}
        | (
            {p.relative_to(current).as_posix() for p in current.rglob("*") if p.is_file()}
            if current.is_dir()
            else set()
        )
    )
    lines: list[str] = []
    whole = True
    for name in names:
        old, new = _lines(current / name), _lines(pending / name)
        if new is None:
            whole = False
            lines.append(
                f"--- pending/{name}: not shown (not text, or over {DIFF_FILE_BYTES // 1024} KiB)\n"
            )
            continue
        lines += difflib.unified_diff(old or [], new, f"approved/{name}", f"pending/{name}")
        if len(lines) > DIFF_LINES:
            return "".join(lines[:DIFF_LINES]) + "\n… (diff cut)\n", False
    return "".join(lines), whole


def _lines(path: Path) -> list[str] | None:
    """The file's lines ([] when it does not exist); None when it cannot be shown."""
    try:
        if not path.exists():
            return []
        if not path.is_file() or path.stat().st_size > DIFF_FILE_BYTES:
            return None
        return path.read_text(encoding="utf-8").splitlines(keepends=True)
    except (OSError, UnicodeDecodeError):
        return None


def decide_hook(
    settings: Settings,
    hooks_dir: Path,
    name: str,
    approve: bool,
    who: str,
    shown_sha256: str | None = None,
) -> dict[str, Any]:
    """Approve (move into the hooks folder) or reject (delete) a pending agent-written hook,
    recorded in the change history: what ``hookbus hooks approve|reject`` does. An approval
    names the copy the page showed (``shown_sha256``): another copy is refused, and so is
    one whose diff the page could not show whole."""
    from hookbus.authoring.pending import approve_pending, pending_dir, reject_pending
    from hookbus.authoring.release import record_change

    if approve:
        if not (pending_dir(hooks_dir) / name).is_dir():
            raise HookNotFound(name, f"the pending hooks of {hooks_dir}")
        if not shown_sha256:
            raise ApprovalUnconfirmed(
                f"an approval of {name} must name the sha256 of the copy that was shown"
            )
        if not _diff(hooks_dir / name, pending_dir(hooks_dir) / name)[1]:
            raise ApprovalUnconfirmed(
                f"{name} is too large to review on this page (its diff is cut or leaves a "
                "file out): read it whole and approve it with `hookbus hooks approve "
                f"{name} --digest SHA256`"
            )
        hook = approve_pending(hooks_dir, name, expect_sha256=shown_sha256)
    else:
        hook = reject_pending(hooks_dir, name)
    recorded = record_change(
        settings,
        action="approve" if approve else "reject",
        actor=who,
        hook=name,
        sha256=hook.sha256,
    )
    return {
        "ok": True,
        "name": name,
        "approved": approve,
        "author": hook.author,
        "sha256": hook.sha256,
        "recorded": recorded,
    }


def dead(settings: Settings, limit: int = 100) -> dict[str, Any]:
    from hookbus.bus.connection import connect
    from hookbus.workers.fleet import dead_letters

    client = connect(settings.effective_rq_redis_url)
    with translated(settings.effective_rq_redis_url):
        jobs = dead_letters.list_dead(client, settings, limit=limit)
        total = dead_letters.count_dead(client, settings)
    return {"total": total, "jobs": [j.to_dict() for j in jobs]}


def dead_show(settings: Settings, job_id: str) -> dict[str, Any]:
    from hookbus.bus.connection import connect
    from hookbus.workers.fleet import dead_letters

    client = connect(settings.effective_rq_redis_url)
    with translated(settings.effective_rq_redis_url):
        return dead_letters.show_dead(client, settings, job_id)


def dead_requeue(settings: Settings, job_id: str) -> dict[str, Any]:
    from hookbus.bus.connection import connect
    from hookbus.workers.fleet import dead_letters

    client = connect(settings.effective_rq_redis_url)
    with translated(settings.effective_rq_redis_url):
        return {"ok": True, "requeued": dead_letters.requeue_dead(client, settings, job_id)}


def dead_purge(settings: Settings, job_id: str | None) -> dict[str, Any]:
    from hookbus.bus.connection import connect
    from hookbus.workers.fleet import dead_letters

    client = connect(settings.effective_rq_redis_url)
    with translated(settings.effective_rq_redis_url):
        count = dead_letters.purge_dead(client, settings, [job_id] if job_id else None)
    return {"ok": True, "purged": count}
