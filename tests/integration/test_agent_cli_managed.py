"""``--scope managed`` against the real binaries: Codex's managed hooks in
``/etc/codex/requirements.toml`` and Gemini CLI's system settings in
``/etc/gemini-cli/settings.json``, each written by the installer with no ``--root``.

Each session runs in a private mount namespace with an overlay on ``/etc`` (``unshare``), so
the files the installer writes there are seen by that session only: nothing on the machine
changes. With Redis unreachable the guarded call is blocked (a user-level install is absent,
so the managed file is what blocks it). Needs root and overlayfs; skipped, saying why,
where the namespace cannot be made or the binaries cannot be installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent_cli_helpers import cli_binary

ROOT = Path(__file__).resolve().parents[2]
UNREACHABLE = "redis://127.0.0.1:1/0"

pytestmark = [pytest.mark.slow, pytest.mark.agent_cli]

#: Run inside the namespace: install with --scope managed, run one session, print JSON.
SESSION = """
import json, os, subprocess, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from tests.integration import agent_clis
from tests.integration.fake_codex_model import FakeCodexModel, serve as serve_codex
from tests.integration.fake_gemini import FakeGemini, serve as serve_gemini

cli, home, project = {cli!r}, Path({home!r}), Path({project!r})
done = subprocess.run(
    [sys.executable, "-m", "hookbus", cli, "install", "--scope", "managed"],
    env=dict(os.environ, HOME=str(home), PYTHONPATH={root!r}), capture_output=True, text=True,
)
assert done.returncode == 0, done.stderr
env = dict(os.environ, HOOKBUS_REDIS_URL={url!r}, HOOKBUS_NAMESPACE="nowhere")
if cli == "codex":
    model = FakeCodexModel(["echo ran > ran.txt"])
    with serve_codex(model) as base:
        agent_clis.run_codex({binary!r}, base_url=base, home=home, project=project, env=env)
else:
    agent_clis.gemini_settings(home)
    model = FakeGemini([("run_shell_command", {{"command": "echo ran > ran.txt"}})])
    with serve_gemini(model) as base:
        agent_clis.run_gemini({binary!r}, base_url=base, home=home, project=project, env=env)
print(json.dumps({{"results": model.result_texts(), "ran": (project / "ran.txt").exists()}}))
"""


def _namespace_reason() -> str:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return "needs root and unshare to overlay /etc in a private mount namespace"
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "true"], capture_output=True, timeout=30
    )
    return "" if probe.returncode == 0 else f"unshare -m failed: {probe.stderr.decode()[-300:]}"


@pytest.mark.parametrize(("cli", "npm"), [("codex", "codex"), ("gemini-cli", "gemini")])
def test_a_managed_install_guards_every_session_of_the_machine(
    cli: str, npm: str, tmp_path: Path
) -> None:
    why = _namespace_reason()
    if why:
        pytest.skip(why)
    binary = cli_binary(npm)
    home, project, upper, work = (tmp_path / n for n in ("home", "project", "upper", "work"))
    for folder in (home, project, upper, work):
        folder.mkdir()
    script = tmp_path / "session.py"
    script.write_text(
        SESSION.format(
            root=str(ROOT),
            cli=cli,
            home=str(home),
            project=str(project),
            url=UNREACHABLE,
            binary=str(binary),
        )
    )
    overlay = f"lowerdir=/etc,upperdir={upper},workdir={work}"
    done = subprocess.run(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            f'mount -t overlay overlay -o {overlay} /etc && exec "$0" "$1"',
            sys.executable,
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if "mount" in done.stderr and done.returncode != 0 and not done.stdout:
        pytest.skip(f"an overlay on /etc could not be mounted: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["ran"] is False
    (text,) = report["results"]
    assert f"hookbus is unavailable (cannot reach Redis at {UNREACHABLE}" in text
    managed = "codex/requirements.toml" if cli == "codex" else "gemini-cli/settings.json"
    assert (upper / managed).is_file()  # written inside the namespace's overlay only
    assert not Path("/etc", managed).exists()
