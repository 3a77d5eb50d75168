"""A test run writes nothing to the user's home: what its processes write to ``$HOME`` and
the XDG folders lands in the session's private ones (tests/conftest.py).

Proved on a stand-in for the real home: a nested pytest session, with this repository's
conftest, runs as a user whose ``$HOME`` and ``$XDG_RUNTIME_DIR`` are fresh folders, and
does what the suite does that writes user files (a ``hookbus dev`` with its workers, its
state file, the per-user pointer and the bundle cache; publishes through it, one of them
run by the example telemetry hook, which appends to a file in the temp folder; the three
user-scope installers). Afterwards the stand-in home, runtime and temp folders are as empty
as before.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.user_dirs_helpers import USER_DIR_VARIABLES, files_under

ROOT = Path(__file__).resolve().parents[2]

#: The nested session's test: it runs with the repository's conftest as a plugin.
INNER = """
import os, shutil, signal, subprocess, sys, time
from pathlib import Path

EXAMPLES = Path({root!r}) / "examples" / "hooks"
HOOKBUS = str(Path(sys.executable).with_name("hookbus"))


def hookbus(*args, cwd):
    done = subprocess.run([HOOKBUS, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def test_what_writes_user_files(real_redis_url, namespace, tmp_path):
    project = tmp_path / "project"
    for hook in ("block-destructive", "telemetry"):
        shutil.copytree(EXAMPLES / hook, project / "my-hooks" / hook)
    dev = subprocess.Popen(
        [HOOKBUS, "--redis-url", real_redis_url, "-n", namespace, "dev", "-d", "my-hooks"],
        cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        seen = []
        for line in dev.stdout:
            seen.append(line)
            if "Press Ctrl-C" in line:
                break
        assert any("Press Ctrl-C" in x for x in seen), seen
        hookbus("publish", "PreToolUse", "--wait", "--payload",
                '{{"tool_name":"Bash","tool_input":{{"command":"ls"}}}}', cwd=project)
        hookbus("publish", "PostToolUse", "--payload", '{{"tool_name":"Bash"}}', cwd=project)
        telemetry = Path(os.environ["TMPDIR"]) / "hookbus-telemetry.jsonl"
        deadline = time.monotonic() + 30
        while not telemetry.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert telemetry.exists()
        runtime = Path(os.environ["XDG_RUNTIME_DIR"]) / "hookbus"
        assert (runtime / "current.json").exists()
        assert list(runtime.glob("dev-project-*.json"))
    finally:
        dev.send_signal(signal.SIGINT)
        dev.wait(timeout=30)
        dev.stdout.close()
    for cli in ("claude-code", "gemini-cli", "codex"):
        hookbus(cli, "install", "--scope", "user", cwd=project)
    home = Path(os.environ["HOME"])
    for written in (".claude/settings.json", ".gemini/settings.json", ".codex/config.toml"):
        assert (home / written).exists(), written
    cache = Path(os.environ["XDG_CACHE_HOME"])
    assert (cache / "hookbus" / "bundles" / namespace).is_dir()
"""


def test_a_test_session_leaves_the_users_home_as_it_found_it(
    real_redis_url: str, tmp_path: Path
) -> None:
    home, runtime, temp = tmp_path / "real-home", tmp_path / "real-run", tmp_path / "real-tmp"
    for folder in (home / ".config", home / ".cache", runtime, temp):
        folder.mkdir(parents=True)
    inner = tmp_path / "inner" / "test_inner_session.py"
    inner.parent.mkdir()
    inner.write_text(INNER.format(root=str(ROOT)))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in USER_DIR_VARIABLES and not k.startswith("HOOKBUS_")
    }
    env.update(
        HOME=str(home),
        XDG_RUNTIME_DIR=str(runtime),
        TMPDIR=str(temp),
        HOOKBUS_TEST_REDIS_URL=real_redis_url,
        PYTHONPATH=str(ROOT),
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-p",
            "tests.conftest",
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            str(ROOT),
            "--basetemp",
            str(tmp_path / "inner-tmp"),
            str(inner),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
    assert files_under(home) == []
    assert files_under(runtime) == []
    assert files_under(temp) == []
