"""The real Gemini CLI and Codex binaries, installed from npm and driven offline.

Shared by the integration tests and ``scripts/capture_agent_cli_fixtures.py``:

* :func:`binary` finds a CLI: ``$HOOKBUS_GEMINI_BIN`` / ``$HOOKBUS_CODEX_BIN``, else the
  pinned version installed once with npm under ``$HOOKBUS_TEST_CACHE`` (default
  ``~/.cache/hookbus-tests``). npm or the registry missing raises :class:`BinaryMissing`
  (tests turn it into a failure, never a skip);
* :func:`run_gemini` runs ``gemini -p`` headless against a fake Gemini API
  (:mod:`tests.integration.fake_gemini`) with a given ``$HOME``;
* :func:`run_codex` runs ``codex exec`` against a fake Responses API
  (:mod:`tests.integration.fake_codex_model`), the provider given with ``-c`` so the
  config.toml under test holds only what the installer wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

GEMINI_VERSION = "0.61.0"
CODEX_VERSION = "0.169.0"
#: (npm package, version, binary name, override variable) per CLI.
PACKAGES = {
    "gemini": ("@google/gemini-cli", GEMINI_VERSION, "gemini", "HOOKBUS_GEMINI_BIN"),
    "codex": ("@openai/codex", CODEX_VERSION, "codex", "HOOKBUS_CODEX_BIN"),
}
#: The model name both fakes answer to.
GEMINI_MODEL = "gemini-2.5-flash"
CODEX_MODEL = "gpt-5.4"


class BinaryMissing(RuntimeError):
    """The CLI could not be found or installed; the message says what to do."""


def cache_dir() -> Path:
    return Path(os.environ.get("HOOKBUS_TEST_CACHE") or Path.home() / ".cache" / "hookbus-tests")


def binary(cli: str) -> Path:
    """The path of ``cli`` (``gemini`` or ``codex``), installing the pinned version once."""
    package, version, name, variable = PACKAGES[cli]
    explicit = os.environ.get(variable)
    if explicit:
        return Path(explicit)
    prefix = cache_dir() / f"{cli}-{version}"
    found = prefix / "node_modules" / ".bin" / name
    if found.exists():
        return found
    npm = shutil.which("npm")
    if npm is None:
        raise BinaryMissing(f"npm is needed to install {package}@{version} (or set {variable})")
    prefix.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            npm,
            "install",
            "--no-audit",
            "--no-fund",
            "--prefix",
            str(prefix),
            f"{package}@{version}",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0 or not found.exists():
        raise BinaryMissing(f"npm install of {package}@{version} failed: {done.stderr[-2000:]}")
    return found


def gemini_settings(home: Path, extra: dict[str, Any] | None = None) -> Path:
    """A user settings.json that selects API-key auth (the fake needs no real key)."""
    path = home / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
    data.update(extra or {})
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def run_gemini(
    gemini: Path,
    *,
    base_url: str,
    home: Path,
    project: Path,
    env: dict[str, str],
    prompt: str = "run the command",
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """One headless Gemini CLI session (``--yolo``: tools run without a prompt)."""
    full = dict(
        env,
        PATH=env.get("PATH") or os.environ.get("PATH", os.defpath),
        HOME=str(home),
        GEMINI_API_KEY="fake-key-for-tests",
        GOOGLE_GEMINI_BASE_URL=base_url,
        GEMINI_CLI_TRUST_WORKSPACE="true",
        NO_COLOR="1",
    )
    return subprocess.run(
        [str(gemini), "-p", prompt, "--yolo", "--skip-trust", "-o", "json", "-m", GEMINI_MODEL],
        env=full,
        cwd=project,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def codex_home(home: Path) -> Path:
    path = home / ".codex"
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_codex(
    codex: Path,
    *,
    base_url: str,
    home: Path,
    project: Path,
    env: dict[str, str],
    prompt: str = "run the command",
    extra: tuple[str, ...] = (),
    sandbox: str = "danger-full-access",
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """One ``codex exec`` session, the fake as its model provider (``-c`` overrides)."""
    provider = (
        f'{{name="fake", base_url="{base_url}", env_key="HOOKBUS_FAKE_OPENAI_KEY", '
        'wire_api="responses"}'
    )
    full = dict(
        env,
        PATH=env.get("PATH") or os.environ.get("PATH", os.defpath),
        HOME=str(home),
        CODEX_HOME=str(codex_home(home)),
        HOOKBUS_FAKE_OPENAI_KEY="fake-key-for-tests",
        NO_COLOR="1",
    )
    return subprocess.run(
        [
            str(codex),
            "exec",
            "--skip-git-repo-check",
            "-s",
            sandbox,
            "-m",
            CODEX_MODEL,
            "-c",
            'model_provider="fake"',
            "-c",
            f"model_providers.fake={provider}",
            *extra,
            prompt,
        ],
        env=full,
        cwd=project,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
