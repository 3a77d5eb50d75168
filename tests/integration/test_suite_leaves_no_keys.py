"""The test suite leaves nothing in a Redis: by default each run starts a server of its own,
and pointed at a shared one (``$HOOKBUS_TEST_REDIS_URL``) it deletes every key it wrote,
RQ's job, worker and execution records included, which RQ files by job id rather than by
queue.

Proved with nested pytest sessions over the fan-out tests, which run real RQ workers: the
shared stand-in is a server of this test's own, holding a key of "someone else's" that must
be all that is there afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import redis

from hookbus.bus.embedded import EmbeddedServer

ROOT = Path(__file__).resolve().parents[2]

#: Fan-out tests that enqueue RQ jobs, one at a time and in packs, and stop their workers.
FANOUT_TESTS = (
    "tests/integration/test_fanout_library.py",
    "tests/integration/test_fanout_packs.py",
)

#: A test that says which server the suite's fixture handed it.
WHICH_SERVER = """
def test_which_server(real_redis_url):
    print("SERVER=" + real_redis_url)
"""


def _pytest(
    args: list[str], env: dict[str, str], basetemp: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-s",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-p",
            "no:xdist",
            "--basetemp",
            str(basetemp),
            *args,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update(extra)
    return env


def test_pointed_at_a_shared_server_the_fanout_tests_leave_only_what_was_there(
    tmp_path: Path,
) -> None:
    with EmbeddedServer() as shared:
        client = redis.Redis.from_url(shared.url, protocol=2)
        client.set("someone-else:key", "kept")
        done = _pytest(
            list(FANOUT_TESTS), _environment(HOOKBUS_TEST_REDIS_URL=shared.url), tmp_path
        )
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
        left = sorted(key.decode() for key in client.scan_iter(count=1000))
        client.close()
    assert left == ["someone-else:key"]


def test_by_default_the_suite_starts_a_server_of_its_own_instead_of_using_6379(
    tmp_path: Path,
) -> None:
    inner = tmp_path / "inner" / "test_which.py"
    inner.parent.mkdir()
    inner.write_text(WHICH_SERVER)
    done = _pytest(
        [
            "-p",
            "tests.conftest",
            "--rootdir",
            str(ROOT),
            "-c",
            str(ROOT / "pyproject.toml"),
            str(inner),
        ],
        _environment(PYTHONPATH=str(ROOT)),
        tmp_path / "t",
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    (line,) = [x for x in done.stdout.splitlines() if "SERVER=" in x]
    url = line.split("SERVER=", 1)[1]
    assert url.startswith("redis://127.0.0.1:"), url
    assert ":6379/" not in url, url
