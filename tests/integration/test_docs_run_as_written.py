"""The console blocks of README.md, examples/hooks/README.md and docs/hooks.md run as
written, in a fresh folder holding a copy of examples/, and print what the docs show
(timings and ids aside): the local hook runs with no Redis, the bus commands against a chain
worker on the example hooks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hookbus.bus.keys import Keys
from hookbus.workers.fleet.heartbeat import list_workers
from tests.blocking_helpers import wait_for
from tests.docs_run_helpers import console_blocks, run_block

ROOT = Path(__file__).resolve().parents[2]
HOOKS_README = ROOT / "examples" / "hooks" / "README.md"


def _section(path: Path, start: str, end: str | None) -> str:
    text = path.read_text()
    text = text[text.index(start) :]
    return text[: text.index(end)] if end else text


@pytest.fixture
def fresh(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A folder like the repository root (a copy of examples/), and a clean environment
    with this interpreter's ``hookbus`` first on PATH; temp files stay in the test's folder."""
    folder = tmp_path / "repo"
    shutil.copytree(ROOT / "examples", folder / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    bin_dir = str(Path(sys.executable).parent)
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(tmp_path),
        TMPDIR=str(tmp_path),
        COLUMNS="200",
        PYTHONPATH=str(ROOT),
    )
    return folder, env


@pytest.fixture
def on_the_bus(
    fresh: tuple[Path, dict[str, str]],
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
) -> Iterator[tuple[Path, dict[str, str]]]:
    """``fresh``, with a chain worker serving examples/hooks in a namespace of its own."""
    folder, env = fresh
    env = {**env, "HOOKBUS_REDIS_URL": real_redis_url, "HOOKBUS_NAMESPACE": namespace}
    worker = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "worker", "--role", "chain", "-d", "examples/hooks"],
        cwd=folder,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: [
                w
                for w in list_workers(real_redis, Keys.for_namespace(namespace))
                if w.pid == worker.pid and w.hooks
            ],
            what="the chain worker with the example hooks",
        )
        yield folder, env
    finally:
        worker.terminate()
        worker.wait(timeout=20)


def _mismatches(blocks: list[str], folder: Path, env: dict[str, str]) -> list[str]:
    found = []
    for block in blocks:
        for step in run_block(block, cwd=folder, env=env):
            problem = step.mismatch()
            if problem:
                found.append(problem)
    return found


def test_the_example_hooks_run_one_by_one_as_written(fresh: tuple[Path, dict[str, str]]) -> None:
    folder, env = fresh
    blocks = console_blocks(_section(HOOKS_README, "## Try them", "## On the bus"))
    assert len(blocks) >= 6
    problems = _mismatches(blocks, folder, env)
    assert not problems, "\n".join(problems)


def test_the_example_hooks_on_the_bus_answer_as_written(
    on_the_bus: tuple[Path, dict[str, str]],
) -> None:
    folder, env = on_the_bus
    blocks = console_blocks(_section(HOOKS_README, "## On the bus", None))
    blocks = [b for b in blocks if "hookbus dev" not in b]  # the fixture's worker stands in
    assert blocks
    problems = _mismatches(blocks, folder, env)
    assert not problems, "\n".join(problems)


def test_the_readme_console_block_answers_as_written(
    on_the_bus: tuple[Path, dict[str, str]],
) -> None:
    folder, env = on_the_bus
    blocks = console_blocks(_section(ROOT / "README.md", "## Two commands", "## From Python"))
    assert blocks
    problems = _mismatches(blocks, folder, env)
    assert not problems, "\n".join(problems)


def test_the_hooks_guide_s_scaffold_and_run_print_what_it_shows(
    fresh: tuple[Path, dict[str, str]],
) -> None:
    folder, env = fresh
    blocks = console_blocks((ROOT / "docs" / "hooks.md").read_text())
    assert blocks
    problems = _mismatches(blocks, folder, env)
    assert not problems, "\n".join(problems)
    assert (folder / "hooks" / "guard" / "HOOK.toml").is_file()
