"""The adapter's own reading of the configuration (no settings module on the lean path):
same sources and order as every hookbus command."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hookbus import defaults
from hookbus.errors import ConfigError
from hookbus.harnesses.lean.config import load


@pytest.fixture(autouse=True)
def no_dev(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No running ``hookbus dev`` leaks in from the machine."""
    monkeypatch.setenv("HOOKBUS_DEV_STATE", str(tmp_path / "no-dev.json"))
    monkeypatch.chdir(tmp_path)


def test_defaults_without_file_or_variables(tmp_path: Path) -> None:
    cfg = load({}, cwd=str(tmp_path))
    assert cfg.redis_url == defaults.DEFAULT_REDIS_URL
    assert cfg.namespace == defaults.DEFAULT_NAMESPACE
    assert cfg.deadline_ms("PreToolUse") == defaults.DEFAULT_DEADLINE_MS
    assert cfg.policy("PreToolUse") is None
    assert cfg.file is None


def test_the_file_is_read_and_variables_win(tmp_path: Path) -> None:
    (tmp_path / "hookbus.toml").write_text(
        'redis_url = "redis://file:1/0"\nnamespace = "from-file"\n'
        "[deadlines]\nPre_Tool_Use = 900\ndefault = 300\n"
        '[on_timeout]\nStop = "deny"\n'
        "[streams]\nevents_maxlen = 77\n"
        "[workers]\ndead_after_ms = 1234\n"
    )
    cfg = load({"HOOKBUS_NAMESPACE": "from-env"}, cwd=str(tmp_path))
    assert cfg.redis_url == "redis://file:1/0"
    assert cfg.namespace == "from-env"
    assert cfg.deadline_ms("PreToolUse") == 900
    assert cfg.deadline_ms("SessionStart") == 300
    assert cfg.policy("Stop") == "deny"
    assert cfg.events_maxlen == 77
    assert cfg.dead_after_ms == 1234
    assert cfg.file == str(tmp_path / "hookbus.toml")


def test_a_kind_is_found_under_its_cli_name_too(tmp_path: Path) -> None:
    cfg = load({"HOOKBUS_DEADLINES__USERPROMPTSUBMIT": "700"}, cwd=str(tmp_path))
    assert cfg.deadline_ms("PromptSubmit", "UserPromptSubmit") == 700


def test_hookbus_config_names_the_file(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.toml"
    other.write_text('namespace = "named"\n')
    assert load({"HOOKBUS_CONFIG": str(other)}, cwd=str(tmp_path)).namespace == "named"
    with pytest.raises(ConfigError, match="no such file"):
        load({"HOOKBUS_CONFIG": str(tmp_path / "missing.toml")}, cwd=str(tmp_path))


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        ("redis_url = [", {}, "not valid TOML"),
        ("[deadlines]\nPreToolUse = 0\n", {}, "must be > 0"),
        ('[on_timeout]\nPreToolUse = "maybe"\n', {}, "'allow' or 'deny'"),
        ("", {"HOOKBUS_DEADLINES__STOP": "soon"}, "whole number"),
        ('streams = "x"\n', {}, "expected a table"),
    ],
)
def test_bad_values_are_config_errors_naming_the_setting(
    tmp_path: Path, text: str, env: dict[str, str], message: str
) -> None:
    (tmp_path / "hookbus.toml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        load(env, cwd=str(tmp_path))


def test_a_running_hookbus_dev_provides_what_is_not_configured(tmp_path: Path) -> None:
    state = tmp_path / "dev.json"
    state.write_text(
        json.dumps(
            {"redis_url": "redis://127.0.0.1:41234/0", "namespace": "dev", "pid": os.getpid()}
        )
    )
    named = {"HOOKBUS_DEV_STATE": str(state)}
    cfg = load(named, cwd=str(tmp_path))
    assert (cfg.redis_url, cfg.namespace) == ("redis://127.0.0.1:41234/0", "dev")
    assert cfg.sources["redis_url"] == f"dev:{state}"
    assert load({**named, "HOOKBUS_REDIS_URL": "redis://env:1/0"}, cwd=str(tmp_path)).redis_url == (
        "redis://env:1/0"
    )
    state.write_text(json.dumps({"redis_url": "redis://gone:1/0", "pid": 2**22 + 12345}))
    with pytest.raises(ConfigError, match="has stopped"):  # never a quiet fall-through
        load(named, cwd=str(tmp_path))
    stopped = {"redis_url": "redis://gone:1/0", "pid": os.getpid(), "stopped": True}
    state.write_text(json.dumps(stopped))
    with pytest.raises(ConfigError, match="has stopped"):
        load(named, cwd=str(tmp_path))


def test_a_hook_run_from_a_deleted_folder_still_reads_its_configuration(tmp_path: Path) -> None:
    import subprocess
    import sys

    gone = tmp_path / "gone"
    gone.mkdir()
    code = (
        "import os, sys\n"
        f"os.chdir({str(gone)!r}); os.rmdir({str(gone)!r})\n"
        "from hookbus.harnesses.lean.config import load\n"
        "print(load().namespace)\n"
    )
    env = {**os.environ, "HOOKBUS_NAMESPACE": "from-env"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "from-env"
