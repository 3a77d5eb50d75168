"""deploy/Dockerfile's steps, replayed without a Docker daemon: the build stage's COPY lines
bring in everything `pip wheel` needs (a missing ``bin/hookbus`` stopped the build), the wheel
installs a working ``hookbus`` command, and the final stage installs the sandbox agents'
hooks run in."""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def _stages() -> list[list[str]]:
    """The Dockerfile's instructions per stage, continuation lines joined, comments dropped."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    stages: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages


def _copied_sources(stage: list[str]) -> list[str]:
    sources: list[str] = []
    for line in stage:
        if line.upper().startswith("COPY ") and "--from=" not in line:
            sources.extend(line.split()[1:-1])
    return sources


def test_the_build_stage_copies_only_files_that_exist() -> None:
    for source in _copied_sources(_stages()[0]):
        assert (ROOT / source).exists(), source


@pytest.mark.slow
def test_the_build_stage_s_files_make_a_wheel_whose_command_runs(tmp_path: Path) -> None:
    context = tmp_path / "src"
    context.mkdir()
    for source in _copied_sources(_stages()[0]):
        if (ROOT / source).is_dir():
            shutil.copytree(
                ROOT / source, context / source, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(ROOT / source, context / source)
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(wheels), "."],
        cwd=context,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = wheels.glob("hookbus-*.whl")
    target = tmp_path / "venv"
    venv.create(target, with_pip=False)
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(target / "bin" / "python"),
            "install",
            "-q",
            "--no-deps",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    # --version is answered before any dependency is imported, so the bare venv suffices
    version = subprocess.run(
        [str(target / "bin" / "hookbus"), "--version"], capture_output=True, text=True, timeout=60
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("hookbus ")


def test_the_final_stage_installs_the_agent_hook_sandbox() -> None:
    final = " ".join(_stages()[-1])
    assert "apt-get install" in final
    for package in ("bubblewrap", "util-linux"):
        assert f" {package}" in final, package


def test_the_final_stage_runs_hookbus_as_a_non_root_user() -> None:
    final = _stages()[-1]
    users = [line.split()[1] for line in final if line.upper().startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    assert 'ENTRYPOINT ["hookbus"]' in final
