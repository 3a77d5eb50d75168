"""Helpers shared by ``test_replay.py`` and the test modules that
need the same set-up (a test module never imports another)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# (manifest, guard.sh): a shell guard that denies (exit 2, reason on stderr) on a pattern.
RM_GUARD = (
    'name = "no-rm-rf"\nevents = ["PreToolUse"]\npriority = 10\n'
    '[action.shell]\ncommand = "sh guard.sh"\ntimeout_secs = 5\n',
    "if grep -q 'rm -rf'; then echo 'no recursive deletes' >&2; exit 2; fi\n",
)


ENV_GUARD = (
    'name = "no-dotenv"\nevents = ["PreToolUse"]\npriority = 20\n'
    '[action.shell]\ncommand = "sh guard.sh"\ntimeout_secs = 5\n',
    "if grep -q '[.]env'; then echo 'secrets stay unread' >&2; exit 2; fi\n",
)


def hooks_folder(root: Path, **hooks: tuple[str, str]) -> Path:
    for name, (manifest, script) in hooks.items():
        (root / name).mkdir(parents=True)
        (root / name / "HOOK.toml").write_text(manifest)
        (root / name / "guard.sh").write_text(script)
    return root


def run_replay(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookbus", "replay", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
