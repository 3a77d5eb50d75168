"""Configuration: defaults < hookbus.toml < HOOKBUS_* env < flags, with sources and masking."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookbus.bus.settings.loader import load_settings, mask_url
from hookbus.defaults import DEFAULT_DEADLINE_MS, DEFAULT_MAX_EVENT_BYTES
from hookbus.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hookbus.toml"
    path.write_text(text)
    return path


def test_defaults_apply_without_file_or_env(tmp_path: Path) -> None:
    loaded = load_settings(environ={}, cwd=tmp_path)
    s = loaded.settings
    assert loaded.file is None
    assert s.namespace == "default"
    assert s.redis_url is None
    assert s.streams.max_event_bytes == DEFAULT_MAX_EVENT_BYTES == 1024 * 1024
    assert s.deadline_ms("PreToolUse") == DEFAULT_DEADLINE_MS


def test_guards_deny_on_timeout_by_default_and_the_rest_allow(tmp_path: Path) -> None:
    s = load_settings(environ={}, cwd=tmp_path).settings
    assert s.on_timeout_for("PreToolUse") == "deny"
    assert s.on_timeout_for("before_tool_call") == "deny"
    assert s.on_timeout_for("PermissionRequest") == "deny"
    assert s.on_timeout_for("PromptSubmit") == "allow"
    assert s.on_timeout_for("Stop") == "allow"


def test_the_file_in_the_working_directory_is_found(tmp_path: Path) -> None:
    write(tmp_path, 'namespace = "team-a"\n[deadlines]\nPreToolUse = 500\ndefault = 300\n')
    loaded = load_settings(environ={}, cwd=tmp_path)
    assert loaded.settings.namespace == "team-a"
    assert loaded.settings.deadline_ms("pre_tool_use") == 500
    assert loaded.settings.deadline_ms("Stop") == 300
    assert loaded.sources["namespace"] == f"file:{tmp_path / 'hookbus.toml'}"


def test_precedence_is_flag_over_env_over_file_over_default(tmp_path: Path) -> None:
    path = write(tmp_path, 'namespace = "from-file"\nhooks_dir = "file-hooks"\n')
    env = {"HOOKBUS_NAMESPACE": "from-env", "HOOKBUS_HOOKS_DIR": "env-hooks"}
    loaded = load_settings(path, environ=env, overrides={"namespace": "from-flag"})
    assert loaded.settings.namespace == "from-flag"
    assert loaded.settings.hooks_dir == "env-hooks"
    assert loaded.sources["namespace"] == "flag"
    assert loaded.sources["hooks_dir"] == "env:HOOKBUS_HOOKS_DIR"


def test_nested_env_variables_set_sections_and_tables(tmp_path: Path) -> None:
    env = {
        "HOOKBUS_SECURITY__SKIP_SECURITY_AUDIT": "true",
        "HOOKBUS_AUTONOMY__ALLOWED_COMMANDS": '["git", "ls"]',
        "HOOKBUS_ON_TIMEOUT__PRETOOLUSE": "allow",
        "HOOKBUS_STREAMS__MAX_EVENT_BYTES": "2048",
    }
    s = load_settings(environ=env, cwd=tmp_path).settings
    assert s.security.skip_security_audit is True
    assert s.autonomy.allowed_commands == ("git", "ls")
    assert s.on_timeout_for("PreToolUse") == "allow"
    assert s.streams.max_event_bytes == 2048


def test_hookbus_config_env_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere.toml"
    path.write_text('namespace = "x"\n')
    assert load_settings(environ={"HOOKBUS_CONFIG": str(path)}).settings.namespace == "x"


def test_a_malformed_file_is_one_clear_error(tmp_path: Path) -> None:
    path = write(tmp_path, "namespace = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(path, environ={})


def test_a_mistyped_value_names_the_field_and_its_source(tmp_path: Path) -> None:
    path = write(tmp_path, "[streams]\nmax_event_bytes = 'lots'\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    assert "streams.max_event_bytes" in str(info.value)
    assert str(path) in str(info.value)


def test_an_unknown_setting_is_rejected_rather_than_ignored(tmp_path: Path) -> None:
    path = write(tmp_path, "[streams]\nmax_evnt_bytes = 5\n")
    with pytest.raises(ConfigError, match="max_evnt_bytes"):
        load_settings(path, environ={})


def test_a_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml", environ={})


def test_a_non_positive_deadline_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, "[deadlines]\nPreToolUse = 0\n")
    with pytest.raises(ConfigError, match="must be > 0"):
        load_settings(path, environ={})


def test_passwords_are_masked_in_the_shown_settings(tmp_path: Path) -> None:
    env = {"HOOKBUS_REDIS_URL": "rediss://bus:s3cret@redis.example:6380/2"}
    loaded = load_settings(environ=env, cwd=tmp_path)
    assert loaded.masked["redis_url"] == "rediss://bus:***@redis.example:6380/2"
    assert "s3cret" not in repr(loaded.masked)


def test_mask_url_leaves_urls_without_password_alone() -> None:
    assert mask_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    assert mask_url("unix:///tmp/r.sock") == "unix:///tmp/r.sock"


def test_custom_kinds_extend_the_catalogue(tmp_path: Path) -> None:
    path = write(tmp_path, "[custom_kinds]\nDeployRequested = true\n")
    catalogue = load_settings(path, environ={}).settings.catalogue()
    assert catalogue.resolve("DeployRequested").may_block


@pytest.mark.parametrize("table", ["deadlines", "on_timeout"])
def test_a_misspelt_kind_in_a_per_kind_table_is_an_error(tmp_path: Path, table: str) -> None:
    value = "500" if table == "deadlines" else '"deny"'
    path = write(tmp_path, f"[{table}]\nPreToolUze = {value}\n")
    with pytest.raises(ConfigError, match=f"{table}.PreToolUze: unknown event kind"):
        load_settings(path, environ={})


def test_aliases_and_custom_kinds_are_valid_per_kind_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "[custom_kinds]\nDeploy = true\n[deadlines]\nbefore_tool_call = 400\nDeploy = 900\n",
    )
    s = load_settings(path, environ={}).settings
    assert s.deadline_ms("PreToolUse") == 400
    assert s.deadline_ms("Deploy") == 900


def test_a_misspelt_variable_is_warned_about_by_name_with_the_closest_setting(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    env = {"HOOKBUS_NAMESPCE": "team-a", "HOOKBUS_WORKERS__CONCURENCY": "4"}
    with caplog.at_level("WARNING", logger="hookbus.bus.settings.loader"):
        loaded = load_settings(environ=env, cwd=tmp_path)
    assert loaded.settings.namespace == "default"
    assert loaded.warnings == (
        "HOOKBUS_NAMESPCE is not a hookbus setting and is ignored; did you mean HOOKBUS_NAMESPACE?",
        "HOOKBUS_WORKERS__CONCURENCY is not a hookbus setting and is ignored; "
        "did you mean HOOKBUS_WORKERS__CONCURRENCY?",
    )
    assert [r.getMessage() for r in caplog.records] == list(loaded.warnings)


def test_a_variable_far_from_any_setting_is_still_named(tmp_path: Path) -> None:
    loaded = load_settings(environ={"HOOKBUS_ZZZ": "1"}, cwd=tmp_path)
    [line] = loaded.warnings
    assert line.startswith("HOOKBUS_ZZZ is not a hookbus setting")
    assert "did you mean" not in line


def test_variables_read_elsewhere_are_not_reported(tmp_path: Path) -> None:
    env = {
        "HOOKBUS_TELEMETRY_FILE": "/tmp/t.jsonl",
        "HOOKBUS_WORKER_ROLE": "chain",
        "HOOKBUS_HOOK_ID": "guard",
        "HOOKBUS_TEST_REDIS_URL": "redis://x",
    }
    assert load_settings(environ=env, cwd=tmp_path).warnings == ()


@pytest.mark.parametrize(
    ("var", "raw", "expected"),
    [
        ("HOOKBUS_WORKERS__CONCURRENCY", "lots", "expected an integer from 1 to 1024"),
        ("HOOKBUS_WORKERS__CONCURRENCY", "0", "expected an integer from 1 to 1024"),
        ("HOOKBUS_STREAMS__REPLY_TTL_S", "-5", "expected an integer >= 1"),
        ("HOOKBUS_SECURITY__SKIP_SECURITY_AUDIT", "maybe", "expected true or false"),
        ("HOOKBUS_RQ__ISOLATION", "thread", "expected one of 'fork', 'none'"),
        ("HOOKBUS_AUTONOMY__ALLOWED_COMMANDS", "git", "expected a list of strings"),
        ("HOOKBUS_ON_TIMEOUT__PRETOOLUSE", "maybe", "expected one of 'allow', 'deny'"),
    ],
)
def test_a_bad_value_names_the_variable_and_the_form_expected(
    tmp_path: Path, var: str, raw: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(environ={var: raw}, cwd=tmp_path)
    message = str(info.value)
    assert f"{var}={raw!r}" in message
    assert expected in message


def test_a_bad_value_in_the_file_names_the_file_the_setting_and_the_form(tmp_path: Path) -> None:
    path = write(tmp_path, "[workers]\nconcurrency = 0\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    assert str(info.value) == (
        f"invalid configuration (file:{path}): workers.concurrency = 0: "
        "expected an integer from 1 to 1024"
    )


def test_an_unknown_file_setting_suggests_the_closest_name(tmp_path: Path) -> None:
    path = write(tmp_path, "[streams]\nmax_evnt_bytes = 5\n")
    with pytest.raises(ConfigError, match="did you mean 'max_event_bytes'"):
        load_settings(path, environ={})


def test_workers_must_be_declared_dead_later_than_their_heartbeat(tmp_path: Path) -> None:
    env = {"HOOKBUS_WORKERS__DEAD_AFTER_MS": "500"}
    with pytest.raises(ConfigError) as info:
        load_settings(environ=env, cwd=tmp_path)
    assert "env:HOOKBUS_WORKERS__DEAD_AFTER_MS" in str(info.value)
    assert "must be more than workers.heartbeat_interval_ms (1000)" in str(info.value)


def test_loading_settings_does_not_import_pydantic() -> None:
    import subprocess
    import sys

    code = (
        "import sys\nfrom hookbus.bus.settings.loader import load_settings\n"
        "load_settings(environ={'HOOKBUS_WORKERS__CONCURRENCY': '3'})\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0].startswith('pydantic')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_every_hookbus_variable_the_code_reads_is_a_setting_or_known() -> None:
    import re

    from hookbus.bus.settings.env import OTHER_VARIABLES, setting_variables

    root = Path(__file__).resolve().parents[2] / "hookbus"
    named = set()
    for path in root.rglob("*.py"):
        named |= set(re.findall(r"\bHOOKBUS_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    tables = ("HOOKBUS_DEADLINES__", "HOOKBUS_ON_TIMEOUT__", "HOOKBUS_CUSTOM_KINDS__")
    known = set(setting_variables()) | OTHER_VARIABLES
    unknown = {n for n in named if n not in known and not n.startswith(tables)}
    assert unknown <= {"HOOKBUS_NAMESPCE", "HOOKBUS_SELF_EDIT"}, sorted(unknown)
