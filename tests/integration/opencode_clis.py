"""OpenCode and Kilo CLI sessions, headless and offline, for the real-binary tests.

Both run ``<cli> run --format json`` (Kilo with ``--auto``: it asks before every bash call
and ``run`` rejects an ask) against the fake Chat Completions model of
:mod:`tests.integration.fake_openai_chat`, named as a provider in the project's
``opencode.json`` / ``kilo.json``. What they need to stay offline and inside the test's
folders:

* ``$HOME`` and every ``XDG_*`` folder under the test's home (the user config folder is
  ``$XDG_CONFIG_HOME/<cli>``), ``PWD`` set to the project (the CLI takes its project from
  ``$PWD``, not from its working directory);
* the ``*_DISABLE_*`` variables that turn off auto-update, the models fetch, default
  plugins, LSP downloads and sharing (Kilo also its session ingest, indexing and presence);
* each config folder pre-seeded with a ``package.json``, a ``package-lock.json`` listing the
  plugin API package and an empty ``node_modules/``: otherwise the CLI runs an npm install
  of that package in every config folder at start-up (a registry fetch; offline it retries
  for about 70 s). hookbus's plugin imports nothing, so nothing needs installing.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.integration.agent_clis import CHAT_MODEL


@dataclass(frozen=True)
class Flavor:
    """What differs between OpenCode and its fork."""

    config_file: str
    folder: str
    variable_prefix: str
    plugin_package: str
    run_flags: tuple[str, ...]
    disabled: tuple[str, ...]


_DISABLED = ("AUTOUPDATE", "MODELS_FETCH", "DEFAULT_PLUGINS", "LSP_DOWNLOAD", "SHARE")
#: adapter row -> its flavor.
FLAVORS = {
    "opencode": Flavor(
        "opencode.json", "opencode", "OPENCODE", "@opencode-ai/plugin", (), _DISABLED
    ),
    "kilo": Flavor(
        "kilo.json",
        "kilo",
        "KILO",
        "@kilocode/plugin",
        ("--auto",),
        (*_DISABLED, "SESSION_INGEST", "CODEBASE_INDEXING", "PRESENCE"),
    ),
}
#: The npm CLI of :mod:`tests.integration.agent_clis` per adapter row.
NPM_CLI = {"opencode": "opencode", "kilo": "kilo"}


def xdg_env(home: Path) -> dict[str, str]:
    """``HOME`` and the XDG folders, all under ``home``."""
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
    }


def user_config_dir(cli: str, home: Path) -> Path:
    return home / ".config" / FLAVORS[cli].folder


def preseed(cli: str, folder: Path) -> None:
    """Make ``folder`` a config folder whose plugin dependencies count as installed."""
    package = FLAVORS[cli].plugin_package
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "node_modules").mkdir(exist_ok=True)
    deps = {"dependencies": {package: "*"}}
    (folder / "package.json").write_text(json.dumps(deps) + "\n")
    lock = {"name": folder.name, "lockfileVersion": 3, "requires": True, "packages": {"": deps}}
    (folder / "package-lock.json").write_text(json.dumps(lock) + "\n")


def prepare(cli: str, home: Path, project: Path, base_url: str) -> None:
    """The project's provider config (the fake model) and both config folders pre-seeded."""
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "Fake",
        "options": {"baseURL": base_url, "apiKey": "dummy"},
        "models": {CHAT_MODEL: {"name": "Fake model", "tool_call": True}},
    }
    config = {
        "provider": {"fake": provider},
        "model": f"fake/{CHAT_MODEL}",
        "small_model": f"fake/{CHAT_MODEL}",
        "autoupdate": False,
        "share": "disabled",
    }
    flavor = FLAVORS[cli]
    (project / flavor.config_file).write_text(json.dumps(config, indent=2) + "\n")
    preseed(cli, project / f".{flavor.folder}")
    preseed(cli, user_config_dir(cli, home))


def run_session(
    cli: str,
    binary: Path,
    *,
    home: Path,
    project: Path,
    env: dict[str, str],
    prompt: str = "run the command",
    timeout: float = 240,
) -> subprocess.CompletedProcess[str]:
    """One ``<cli> run`` turn in ``project`` (after :func:`prepare`)."""
    flavor = FLAVORS[cli]
    full = dict(env, **xdg_env(home), PWD=str(project), NO_COLOR="1")
    full["PATH"] = os.pathsep.join([str(binary.parent), env.get("PATH") or os.defpath])
    for name in flavor.disabled:
        full[f"{flavor.variable_prefix}_DISABLE_{name}"] = "true"
    return subprocess.run(
        [str(binary), "run", "--format", "json", "--print-logs", *flavor.run_flags, prompt],
        env=full,
        cwd=project,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
