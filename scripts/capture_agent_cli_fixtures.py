#!/usr/bin/env python3
"""Re-capture the hook-input fixtures of Gemini CLI, Codex, GitHub Copilot CLI, Qwen Code,
Cline, OpenCode and Kilo CLI from the real binaries.

Run it when a new version of a CLI comes out (bump the pinned versions in
``tests/integration/agent_clis.py`` first)::

    .venv/bin/python scripts/capture_agent_cli_fixtures.py            # every CLI
    .venv/bin/python scripts/capture_agent_cli_fixtures.py gemini     # one (codex, copilot, qwen,
                                                                      # cline, opencode, kilo)

For each CLI it registers a recorder hook on every event of hookbus's adapter table (the
recorder is this script's ``record`` sub-command: it saves its stdin as
``<Event>.json`` the first time an event fires and prints nothing), runs headless sessions
against the local fake model endpoints (a shell call, then an answer), and writes what arrived to
``tests/fixtures/<cli>/``. Temporary paths are replaced by
``/tmp/hookbus-capture`` so a re-capture diffs cleanly. Events that do not fire headless
(Gemini's Notification; Codex's PermissionRequest, which ``codex exec`` never raises as
its approval policy is always "never", PreCompact, PostCompact, SubagentStart,
SubagentStop, Interrupt; those of Copilot CLI and Qwen Code that a one-call session does not
raise; Cline's TaskResume, UserPromptSubmit and PreCompact) are reported, not invented. Cline
runs a second session whose PreToolUse stops the task, for the events of an aborted one.
OpenCode and Kilo CLI get hookbus's own plugin with the recorder as its command, so their
fixtures are exactly what the plugin sends (``<hook>.json``, a bus event as
``event.<type>.json``); a second session with bash set to "ask" raises OpenCode's
``permission.asked``.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hookbus.harnesses.adapters import adapter  # noqa: E402
from hookbus.harnesses.cline_adapter import ADAPTER as CLINE  # noqa: E402
from hookbus.harnesses.codex_adapter import ADAPTER as CODEX  # noqa: E402
from hookbus.harnesses.copilot_adapter import ADAPTER as COPILOT  # noqa: E402
from hookbus.harnesses.gemini_adapter import ADAPTER as GEMINI  # noqa: E402
from hookbus.harnesses.install.opencode import PluginFile  # noqa: E402
from hookbus.harnesses.opencode_adapter import EVENT_HOOK, PLUGIN_HOOKS  # noqa: E402
from hookbus.harnesses.qwen_adapter import ADAPTER as QWEN  # noqa: E402
from tests.integration import (  # noqa: E402
    agent_clis,
    fake_codex_model,
    fake_gemini,
    fake_openai_chat,
    opencode_clis,
)

FIXTURES = ROOT / "tests" / "fixtures"
PLACEHOLDER = "/tmp/hookbus-capture"


def record(out_dir: str, event: str | None = None) -> int:
    """The recorder hook: stdin to ``<out_dir>/<Event>.json`` (first one kept), no output;
    ``event`` names it where the CLI runs a file per event (Cline)."""
    raw = sys.stdin.buffer.read()
    try:
        data = json.loads(raw)
        # Copilot CLI sends some events in its own shape, named only by ``hookName``
        alias = str(data.get("hookName") or "")
        name = event or data.get("hook_event_name") or alias[:1].upper() + alias[1:] or "unnamed"
        if data.get("hook") == EVENT_HOOK:  # OpenCode's plugin: a bus event, by its type
            name = f"event.{data['input']['event']['type']}"
        elif isinstance(data.get("hook"), str):
            name = data["hook"]
    except ValueError:
        name = "not-json"
    target = Path(out_dir) / f"{name}.json"
    if not target.exists():
        target.write_bytes(raw)
    return 0


def _recorder(out_dir: Path) -> str:
    return (
        f"{shlex.quote(sys.executable)} {shlex.quote(__file__)} record {shlex.quote(str(out_dir))}"
    )


def _save(raw_dir: Path, tmp: Path, target: Path, known: list[str]) -> None:
    target.mkdir(parents=True, exist_ok=True)
    seen = []
    for path in sorted(raw_dir.glob("*.json")):
        data = json.loads(path.read_text().replace(str(tmp), PLACEHOLDER))
        (target / path.name).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        seen.append(path.stem)
    missing = [e for e in known if e not in seen]
    print(f"{target.relative_to(ROOT)}: captured {', '.join(seen)}")
    print(f"  did not fire headless: {', '.join(missing) or 'none'}")


def capture_gemini(tmp: Path) -> None:
    gemini = agent_clis.binary("gemini")
    home, project, raw = tmp / "home", tmp / "project", tmp / "raw"
    for folder in (home, project, raw):
        folder.mkdir(parents=True)
    entry = {"type": "command", "command": _recorder(raw), "timeout": 10000}
    hooks = {event: [{"hooks": [entry]}] for event in GEMINI.routes}
    agent_clis.gemini_settings(home, {"hooks": hooks})
    model = fake_gemini.FakeGemini(
        [("run_shell_command", {"command": "echo captured", "description": "echo"})]
    )
    with fake_gemini.serve(model) as url:
        done = agent_clis.run_gemini(gemini, base_url=url, home=home, project=project, env={})
    if done.returncode != 0:
        raise SystemExit(f"gemini failed ({done.returncode}): {done.stderr[-2000:]}")
    _save(raw, tmp, FIXTURES / "gemini_cli", list(GEMINI.routes))


def capture_codex(tmp: Path) -> None:
    codex = agent_clis.binary("codex")
    home, project, raw = tmp / "home", tmp / "project", tmp / "raw"
    for folder in (home, project, raw):
        folder.mkdir(parents=True)
    lines = []
    for event in CODEX.routes:
        lines += [f"[[hooks.{event}]]", f"[[hooks.{event}.hooks]]", 'type = "command"']
        lines += [f"command = {json.dumps(_recorder(raw))}", "timeout = 10", ""]
    (agent_clis.codex_home(home) / "config.toml").write_text("\n".join(lines))
    bypass = ("--dangerously-bypass-hook-trust",)  # the recorder only: nothing to vet
    model = fake_codex_model.FakeCodexModel(["echo captured"])
    with fake_codex_model.serve(model) as url:
        done = agent_clis.run_codex(
            codex, base_url=url, home=home, project=project, env={}, extra=bypass
        )
    if done.returncode != 0:
        raise SystemExit(f"codex failed ({done.returncode}): {done.stderr[-2000:]}")
    _save(raw, tmp, FIXTURES / "codex", list(CODEX.routes))


def capture_copilot(tmp: Path) -> None:
    copilot = agent_clis.binary("copilot")
    home, project, raw = tmp / "home", tmp / "project", tmp / "raw"
    for folder in (home, project, raw):
        folder.mkdir(parents=True)
    entry = {"type": "command", "bash": _recorder(raw), "timeoutSec": 10}
    hooks = {event: [entry] for event in COPILOT.routes}
    hooks_dir = home / ".copilot" / "hooks"
    hooks_dir.mkdir(parents=True)
    (hooks_dir / "recorder.json").write_text(json.dumps({"version": 1, "hooks": hooks}))
    model = fake_openai_chat.FakeChatModel(["echo captured"])
    with fake_openai_chat.serve(model) as url:
        done = agent_clis.run_copilot(copilot, base_url=url, home=home, project=project, env={})
    if done.returncode != 0:
        raise SystemExit(f"copilot failed ({done.returncode}): {done.stderr[-2000:]}")
    _save(raw, tmp, FIXTURES / "copilot", list(COPILOT.routes))


def capture_qwen(tmp: Path) -> None:
    qwen = agent_clis.binary("qwen")
    home, project, raw = tmp / "home", tmp / "project", tmp / "raw"
    for folder in (home, project, raw):
        folder.mkdir(parents=True)
    entry = {"type": "command", "command": _recorder(raw), "timeout": 10000}
    hooks = {event: [{"hooks": [entry]}] for event in QWEN.routes}
    (home / ".qwen").mkdir()
    (home / ".qwen" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    model = fake_openai_chat.FakeChatModel(["echo captured"])
    with fake_openai_chat.serve(model) as url:
        done = agent_clis.run_qwen(qwen, base_url=url, home=home, project=project, env={})
    if done.returncode != 0:
        raise SystemExit(f"qwen failed ({done.returncode}): {done.stderr[-2000:]}")
    _save(raw, tmp, FIXTURES / "qwen_code", list(QWEN.routes))


def capture_cline(tmp: Path) -> None:
    cline = agent_clis.binary("cline")
    home, project, raw = tmp / "home", tmp / "project", tmp / "raw"
    for folder in (home, project, raw):
        folder.mkdir(parents=True)
    hooks_dir = home / ".cline" / "hooks"
    hooks_dir.mkdir(parents=True)
    for event in CLINE.routes:
        (hooks_dir / event).write_text(f"#!/bin/sh\nexec {_recorder(raw)} {event}\n")
    model = fake_openai_chat.FakeChatModel(["echo captured"])
    with fake_openai_chat.serve(model) as url:
        done = agent_clis.run_cline(cline, base_url=url, home=home, project=project, env={})
    if done.returncode != 0:
        raise SystemExit(f"cline failed ({done.returncode}): {done.stderr[-2000:]}")
    # a second task whose guard stops it (``cancel``): the events of an aborted task
    stop = json.dumps({"cancel": True, "errorMessage": "stopped to capture an aborted task"})
    (hooks_dir / "PreToolUse.sh").write_text(f"#!/bin/sh\ncat >/dev/null\necho '{stop}'\n")
    model = fake_openai_chat.FakeChatModel(["echo captured"])
    with fake_openai_chat.serve(model) as url:
        agent_clis.run_cline(cline, base_url=url, home=home, project=project, env={})
    _save(raw, tmp, FIXTURES / "cline", list(CLINE.routes))


def capture_plugin(cli: str, tmp: Path) -> None:
    """OpenCode or Kilo CLI (adapter row ``cli``): hookbus's plugin, the recorder its command."""
    binary = agent_clis.binary(opencode_clis.NPM_CLI[cli])
    home, project, raw = tmp / "home", tmp / "project", tmp / "raw"
    for folder in (home, project, raw):
        folder.mkdir(parents=True)
    row = adapter(cli)
    plugin = opencode_clis.user_config_dir(cli, home) / "plugin" / "hookbus.js"
    PluginFile(row, label=row.label).install(plugin, command=_recorder(raw))
    for command, ask in (("mkfs.ext4 -q -F disk.img", False), ("ls", True)):
        model = fake_openai_chat.FakeChatModel([command])
        with fake_openai_chat.serve(model) as url:
            opencode_clis.prepare(cli, home, project, url)
            if ask:
                config = project / opencode_clis.FLAVORS[cli].config_file
                data = json.loads(config.read_text())
                config.write_text(json.dumps({**data, "permission": {"bash": "ask"}}))
            env = {"PATH": os.environ.get("PATH", os.defpath)}  # mkfs.ext4 is in sbin
            done = opencode_clis.run_session(cli, binary, home=home, project=project, env=env)
        if done.returncode != 0:
            raise SystemExit(f"{cli} failed ({done.returncode}): {done.stderr[-2000:]}")
    names = [n if n in PLUGIN_HOOKS else f"event.{n}" for n in row.routes]
    _save(raw, tmp, FIXTURES / cli, names)


CAPTURES = {
    "gemini": capture_gemini,
    "codex": capture_codex,
    "copilot": capture_copilot,
    "qwen": capture_qwen,
    "cline": capture_cline,
    "opencode": lambda tmp: capture_plugin("opencode", tmp),
    "kilo": lambda tmp: capture_plugin("kilo", tmp),
}


def main(argv: list[str]) -> int:
    if argv[:1] == ["record"]:
        return record(argv[1], argv[2] if len(argv) > 2 else None)
    for cli in argv or list(CAPTURES):
        if cli not in CAPTURES:
            raise SystemExit(f"unknown CLI {cli!r}: choose from {', '.join(CAPTURES)}")
        with tempfile.TemporaryDirectory(prefix="hookbus-capture-") as tmp:
            CAPTURES[cli](Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
