"""Helpers shared by the agent SDK integration tests (``test_openai_agents_sdk.py``,
``test_claude_agent_sdk.py``): the fleet's settings, a fleet that never answers, the calls."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

from hookbus.bus.settings.loader import Settings, load_settings
from hookbus.integrations.fleet import Fleet

#: The guarded command (the example block-destructive guard refuses any mkfs) and a
#: harmless one.
GUARDED = "mkfs.ext4 -q -F disk.img"
HARMLESS = "ls"
#: Where nothing listens: the fleet is down.
UNREACHABLE = "redis://127.0.0.1:1/0"
#: The start of every fail-closed reason.
UNAVAILABLE = "hookbus is unavailable ("


#: A guard's deadline long enough that a hook blocking the loop for it shows beyond doubt.
LONG_DEADLINE_MS = 3000


def settings_for(url: str, ns: str, *, deadline_ms: int | None = None) -> Settings:
    overrides: dict[str, object] = {"redis_url": url, "namespace": ns}
    if deadline_ms is not None:
        overrides["deadlines"] = {"PreToolUse": deadline_ms}
    return load_settings(overrides=overrides, warn=False).settings


def fleet_at(
    url: str,
    ns: str,
    *,
    agent_id: str = "sdk-test",
    timeout_s: float = 10,
    deadline_ms: int | None = None,
) -> Fleet:
    settings = settings_for(url, ns, deadline_ms=deadline_ms)
    return Fleet(settings, agent_id=agent_id, timeout_s=timeout_s)


def project_with_disk(tmp_path: Path) -> Path:
    """A project folder holding ``disk.img``, 1 MiB of zeros until mkfs writes a filesystem."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "disk.img").write_bytes(bytes(1 << 20))
    return project


def untouched(project: Path) -> bool:
    return (project / "disk.img").read_bytes() == bytes(1 << 20)


@contextmanager
def silent_redis() -> Iterator[str]:
    """A Redis URL whose server accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"redis://127.0.0.1:{sock.getsockname()[1]}/0"


class LoopWatch:
    """The times a task on the loop woke (every 50 ms when the loop is free)."""

    def __init__(self) -> None:
        self.ticks: list[float] = []

    @property
    def longest_gap_s(self) -> float:
        return max(b - a for a, b in itertools.pairwise(self.ticks))


@contextlib.asynccontextmanager
async def loop_watch() -> AsyncIterator[LoopWatch]:
    """Watch the running loop: a call that blocks it shows as a long gap between ticks."""
    watch = LoopWatch()

    async def tick() -> None:
        while True:
            watch.ticks.append(time.monotonic())
            await asyncio.sleep(0.05)

    ticker = asyncio.get_running_loop().create_task(tick())
    try:
        yield watch
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
