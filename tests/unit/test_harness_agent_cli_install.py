"""``hookbus gemini-cli install`` and ``hookbus codex install`` on real settings files: the
user's own hooks and keys stay, a second run changes nothing, a backup is written, a dry run
writes nothing, a malformed file is refused untouched, and ``uninstall`` takes out exactly
what was added (for Codex, with the trust records, renumbering those of the groups after
ours)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from hookbus.harnesses.install import codex as codex_install
from hookbus.harnesses.install import gemini_cli as gemini_install
from hookbus.harnesses.install.settings_file import SettingsFileError

ROOT = Path(__file__).resolve().parents[2]
HOOKBUS = "/opt/hookbus/bin/hookbus"

GEMINI_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "hooks": {
        "BeforeTool": [
            {"matcher": "write_file", "hooks": [{"type": "command", "command": "./my-check.sh"}]}
        ]
    },
    "ui": {"theme": "GitHub"},
}

CODEX_CONFIG = """\
# my own Codex setup
model = "gpt-5.4"  # the default model

[model_providers.local]
name = "local"
base_url = "http://127.0.0.1:9999/v1"

[[hooks.PreToolUse]]
matcher = "Bash"
[[hooks.PreToolUse.hooks]]
type = "command"
command = "my-own-guard"
"""


def _gemini_file(tmp_path: Path) -> Path:
    path = tmp_path / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps(GEMINI_SETTINGS, indent=2) + "\n")
    return path


def _codex_file(tmp_path: Path) -> Path:
    path = tmp_path / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text(CODEX_CONFIG)
    return path


def test_gemini_install_adds_every_event_and_keeps_the_users_hooks_and_keys(
    tmp_path: Path,
) -> None:
    path = _gemini_file(tmp_path)
    change = gemini_install.install(path, command=HOOKBUS)
    assert change.changed
    data = json.loads(path.read_text())
    assert data["security"] == GEMINI_SETTINGS["security"]
    assert data["ui"] == {"theme": "GitHub"}
    assert set(data["hooks"]) == set(gemini_install.installable_events())
    mine, ours = data["hooks"]["BeforeTool"]
    assert mine == GEMINI_SETTINGS["hooks"]["BeforeTool"][0]  # type: ignore[index]
    (entry,) = ours["hooks"]
    assert entry["timeout"] == 610_000  # Gemini CLI's unit is the millisecond; parkable
    assert entry["command"].startswith(f"{HOOKBUS} gemini-cli hook --timeout 610 || printf ")
    after = data["hooks"]["AfterTool"][0]["hooks"][0]
    assert after["command"] == f"{HOOKBUS} gemini-cli hook --timeout 10"  # no fallback: no guard
    assert (path.parent / "settings.json.hookbus-backup").read_text() == change.before


def test_gemini_guard_fallback_prints_a_deny_when_hookbus_cannot_run(tmp_path: Path) -> None:
    entry = gemini_install.entry_for("BeforeTool", command=str(tmp_path / "missing"))
    done = subprocess.run(["bash", "-c", entry["command"]], capture_output=True, text=True)
    assert done.returncode == 0
    out = json.loads(done.stdout)
    assert out["decision"] == "deny"
    assert "hookbus gemini-cli hook could not run" in out["reason"]


def test_gemini_install_twice_changes_nothing_and_uninstall_restores_the_file(
    tmp_path: Path,
) -> None:
    path = _gemini_file(tmp_path)
    original = path.read_text()
    gemini_install.install(path, command=HOOKBUS)
    installed = path.read_text()
    again = gemini_install.install(path, command=HOOKBUS)
    assert not again.changed
    assert path.read_text() == installed
    removed = gemini_install.uninstall(path)
    assert set(removed.removed) == set(gemini_install.installable_events())
    assert path.read_text() == original
    assert not gemini_install.uninstall(path).changed


def test_gemini_dry_run_writes_nothing_and_a_malformed_file_is_refused_untouched(
    tmp_path: Path,
) -> None:
    path = _gemini_file(tmp_path)
    original = path.read_text()
    change = gemini_install.install(path, command=HOOKBUS, dry_run=True)
    assert change.changed and "gemini-cli hook" in change.diff()
    assert path.read_text() == original
    path.write_text('{"hooks": [1, 2]}')
    with pytest.raises(SettingsFileError, match="not changed"):
        gemini_install.install(path, command=HOOKBUS)
    assert path.read_text() == '{"hooks": [1, 2]}'


def test_gemini_scopes_and_an_unknown_event(tmp_path: Path) -> None:
    assert gemini_install.settings_path("user", home=tmp_path) == tmp_path / ".gemini/settings.json"
    assert gemini_install.settings_path("project", project=tmp_path) == (
        tmp_path / ".gemini/settings.json"
    )
    with pytest.raises(Exception, match="not a Gemini CLI event"):
        gemini_install.install(tmp_path / "s.json", events=["PreToolUse"], command=HOOKBUS)


def test_codex_trust_hash_is_the_one_the_real_codex_accepted() -> None:
    # recorded with Codex 0.169.0: a hook with this trust record ran without review
    entry = {"type": "command", "command": "python3 /tmp/agx/rec.py /tmp/agx/ccap", "timeout": 10}
    assert codex_install.trust_hash("PreToolUse", [entry]) == (
        "sha256:fda69b32d4e0532f262ce4bdb2edb382c6e8397dd403b53f7d1fdde023be359e"
    )
    assert codex_install.event_label("UserPromptSubmit") == "user_prompt_submit"
    assert codex_install.event_label("Stop") == "stop"


def _state(path: Path) -> dict[str, Any]:
    doc = tomlkit.parse(path.read_text()).unwrap()
    state: dict[str, Any] = doc["hooks"].get("state", {})
    return state


def test_codex_install_adds_trusted_groups_and_keeps_comments_and_the_users_hooks(
    tmp_path: Path,
) -> None:
    path = _codex_file(tmp_path)
    change = codex_install.install(path, command=HOOKBUS)
    text = path.read_text()
    assert text.startswith(CODEX_CONFIG)  # comments, order and the user's hook untouched
    doc = tomlkit.parse(text).unwrap()
    assert set(doc["hooks"]) - {"state"} == set(codex_install.installable_events())
    mine, ours = doc["hooks"]["PreToolUse"]
    assert mine["hooks"][0]["command"] == "my-own-guard"
    (entry,) = ours["hooks"]
    assert entry["command"].startswith(f"{HOOKBUS} codex hook --timeout 610 || printf ")
    assert doc["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] == 3  # Codex clamps it to 3 s
    state = _state(path)
    key = f"{path}:pre_tool_use:1:0"
    assert state[key]["trusted_hash"] == codex_install.trust_hash("PreToolUse", [entry])
    assert f"{path}:pre_tool_use:0:0" not in state  # the user's own hook is the user's to trust
    assert len(state) == len(codex_install.installable_events())
    assert (path.parent / "config.toml.hookbus-backup").read_text() == CODEX_CONFIG
    assert set(change.added) == set(codex_install.installable_events())


def test_codex_install_twice_changes_nothing_and_uninstall_restores_the_file_byte_for_byte(
    tmp_path: Path,
) -> None:
    path = _codex_file(tmp_path)
    codex_install.install(path, command=HOOKBUS)
    installed = path.read_text()
    assert not codex_install.install(path, command=HOOKBUS).changed
    assert path.read_text() == installed
    removed = codex_install.uninstall(path)
    assert set(removed.removed) == set(codex_install.installable_events())
    assert path.read_text() == CODEX_CONFIG
    assert not codex_install.uninstall(path).changed


def test_codex_uninstall_renumbers_the_trust_record_of_a_group_after_ours(
    tmp_path: Path,
) -> None:
    path = _codex_file(tmp_path)
    codex_install.install(path, command=HOOKBUS, events=["PreToolUse"])
    # the user adds (and trusts) another group after ours: it is group 2
    with path.open("a") as fh:
        fh.write(
            '\n[[hooks.PreToolUse]]\n[[hooks.PreToolUse.hooks]]\ntype = "command"\n'
            'command = "later-guard"\n'
        )
    doc = tomlkit.parse(path.read_text())
    doc["hooks"]["state"][f"{path}:pre_tool_use:2:0"] = {"trusted_hash": "sha256:users-own"}
    path.write_text(tomlkit.dumps(doc))
    codex_install.uninstall(path)
    hooks = tomlkit.parse(path.read_text()).unwrap()["hooks"]
    assert [g["hooks"][0]["command"] for g in hooks["PreToolUse"]] == [
        "my-own-guard",
        "later-guard",
    ]
    assert hooks["state"] == {f"{path}:pre_tool_use:1:0": {"trusted_hash": "sha256:users-own"}}


def test_codex_dry_run_and_a_malformed_file(tmp_path: Path) -> None:
    path = _codex_file(tmp_path)
    change = codex_install.install(path, command=HOOKBUS, dry_run=True)
    assert change.changed and "trusted_hash" in change.diff()
    assert path.read_text() == CODEX_CONFIG
    path.write_text("model = \n")
    with pytest.raises(SettingsFileError, match="not valid TOML"):
        codex_install.install(path, command=HOOKBUS)
    assert path.read_text() == "model = \n"
    path.write_text('hooks = "no"\n')
    with pytest.raises(SettingsFileError, match="not a table"):
        codex_install.install(path, command=HOOKBUS)


def test_codex_user_scope_follows_codex_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "ch"))
    assert codex_install.settings_path("user") == tmp_path / "ch" / "config.toml"
    monkeypatch.delenv("CODEX_HOME")
    assert codex_install.settings_path("user", home=tmp_path) == tmp_path / ".codex/config.toml"
    assert codex_install.settings_path("project", project=tmp_path) == (
        tmp_path / ".codex/config.toml"
    )


@pytest.mark.parametrize("cli", ["gemini-cli", "codex"])
def test_the_commands_install_print_the_diff_and_uninstall(cli: str, tmp_path: Path) -> None:
    path = tmp_path / ("settings.json" if cli == "gemini-cli" else "config.toml")

    def hookbus(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "hookbus", cli, *args, "--settings", str(path)],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "dry run" in hookbus("install", "--dry-run", "--command", HOOKBUS)
    assert not path.exists()
    assert f"{cli} hook" in hookbus("install", "--command", HOOKBUS, "--verbose")
    assert "already installed" in hookbus("install", "--command", HOOKBUS)
    report = json.loads(hookbus("uninstall", "--json"))
    assert report["written"] and report["removed"]


@pytest.mark.parametrize("cli", ["gemini-cli", "codex"])
def test_http_mode_writes_a_curl_to_the_gateway_and_uninstall_takes_it_out(
    cli: str, tmp_path: Path
) -> None:
    module: Any = gemini_install if cli == "gemini-cli" else codex_install
    path = _gemini_file(tmp_path) if cli == "gemini-cli" else _codex_file(tmp_path)
    original = path.read_text()
    module.install(path, mode="http", url="http://10.1.2.3:8787/")
    guard = "BeforeTool" if cli == "gemini-cli" else "PreToolUse"
    after = "AfterTool" if cli == "gemini-cli" else "PostToolUse"
    entry = module.entry_for(guard, command="", mode="http", url="http://10.1.2.3:8787/")
    assert entry["command"].startswith(
        "curl --silent --show-error --fail --max-time 609.5 -H 'Content-Type: application/json' "
        f"--data-binary @- 'http://10.1.2.3:8787/v1/hooks/{cli}?timeout=610' || printf "
    )
    assert module.is_ours(entry)
    other = module.entry_for(after, command="", mode="http", url="http://10.1.2.3:8787")
    assert other["command"].endswith(f"/v1/hooks/{cli}?timeout=10' || true")
    assert not module.is_ours({"command": "curl http://10.1.2.3:8787/v1/hooks/claude-code"})
    # a second run in command mode replaces every http entry
    module.install(path, command=HOOKBUS)
    assert "curl --silent" not in path.read_text()
    module.uninstall(path)
    assert path.read_text() == original


@pytest.mark.parametrize("cli", ["gemini-cli", "codex"])
def test_the_gateway_command_with_nothing_listening_prints_the_guards_deny(
    cli: str, tmp_path: Path
) -> None:
    module: Any = gemini_install if cli == "gemini-cli" else codex_install
    guard = "BeforeTool" if cli == "gemini-cli" else "PreToolUse"
    entry = module.entry_for(guard, command="", mode="http", url="http://127.0.0.1:1")
    done = subprocess.run(
        ["bash", "-c", entry["command"]], input="{}", capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0
    assert f"hookbus {cli} hook could not run" in done.stdout


def test_codex_project_hooks_are_trusted_in_the_users_config_and_uninstalled_from_both(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project" / ".codex" / "config.toml"
    user = _codex_file(tmp_path)
    changes = codex_install.install(
        project, command=HOOKBUS, events=["PreToolUse"], trust_file=user
    )
    assert changes.changed and [c.path for c in changes.all] == [project, user]
    assert "hooks.state" not in project.read_text()
    (group,) = tomlkit.parse(project.read_text()).unwrap()["hooks"]["PreToolUse"]
    key = f"{project}:pre_tool_use:0:0"
    assert _state(user) == {
        key: {"trusted_hash": codex_install.trust_hash("PreToolUse", group["hooks"])}
    }
    assert user.read_text().startswith(CODEX_CONFIG)
    again = codex_install.install(project, command=HOOKBUS, events=["PreToolUse"], trust_file=user)
    assert not again.changed
    codex_install.uninstall(project, trust_file=user)
    assert user.read_text() == CODEX_CONFIG
    assert project.read_text() == ""


@pytest.mark.parametrize(
    "given",
    [
        "http://10.1.2.3:8787",
        "http://10.1.2.3:8787/",
        "http://10.1.2.3:8787/v1/hooks",
        "http://10.1.2.3:8787/v1/hooks/{cli}",
        "http://10.1.2.3:8787/v1/hooks/{cli}/?timeout=3",
    ],
)
@pytest.mark.parametrize("cli", ["claude-code", "gemini-cli", "codex", "copilot", "qwen-code"])
def test_url_takes_the_gateways_base_or_its_full_endpoint(
    cli: str, given: str, tmp_path: Path
) -> None:
    from hookbus.harnesses.install import claude_code, copilot, qwen_code

    modules: dict[str, Any] = {
        "claude-code": claude_code,
        "gemini-cli": gemini_install,
        "codex": codex_install,
        "copilot": copilot,
        "qwen-code": qwen_code,
    }
    module = modules[cli]
    event = "BeforeTool" if cli == "gemini-cli" else "PreToolUse"
    url = given.format(cli=cli)
    if cli == "claude-code":
        entry = module.entry_for(event, mode="http", command="", url=url)
        written = entry["url"]
    else:
        entry = module.entry_for(event, command="", mode="http", url=url)
        written = entry.get("command", entry.get("bash"))
    # a guard's entry waits past approvals.wait_s (610 s): the endpoint comes once either way
    assert f"http://10.1.2.3:8787/v1/hooks/{cli}?timeout=610" in written
    assert written.count("/v1/hooks/") == 1
    assert module.is_ours(entry)


def test_a_url_naming_another_clis_endpoint_is_refused(tmp_path: Path) -> None:
    from hookbus.harnesses.install.claude_code import InstallError

    with pytest.raises(InstallError, match="names /v1/hooks/codex, the gateway path of another"):
        gemini_install.install(tmp_path / "s.json", mode="http", url="http://h:8787/v1/hooks/codex")
    assert not (tmp_path / "s.json").exists()
