"""Manifests in three forms (seed 000's parser scenarios, seed 004's HOOK.md, seed 001's YAML)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookbus.bus.kinds import DEFAULT_CATALOGUE
from hookbus.errors import ManifestError
from hookbus.hooks.manifest import (
    HookManifest,
    load_manifest,
    parse_markdown,
    parse_toml,
    parse_yaml,
    split_frontmatter,
)

GUARD = Path("hooks/guard/HOOK.toml")

VALID_TOML = """
name = "guard"
description = "deny destructive shell commands"
version = "1.2.0"
events = ["before_tool_call"]
priority = 10
on_error = "deny"

[match]
tools = ["Bash"]
pattern = "rm\\\\s+-rf"
field = "tool_input.command"

[action.shell]
command = "./guard.sh"
timeout_secs = 3

[modify]
allow_keys = ["command"]

[retries]
count = 2
intervals_s = [1, 5]
"""


def test_a_valid_toml_with_a_shell_action_parses_every_field() -> None:
    manifest = parse_toml(VALID_TOML, GUARD)
    assert manifest.name == "guard"
    assert manifest.events == ["PreToolUse"]
    assert manifest.priority == 10
    assert manifest.on_error == "deny"
    assert manifest.action.kind == "shell"
    assert manifest.action.shell is not None
    assert manifest.action.shell.command == "./guard.sh"
    assert manifest.timeout_s == 3.0
    assert manifest.match.tools == ["Bash"]
    assert manifest.retries.count == 2 and manifest.retries.intervals_s == [1, 5]
    assert manifest.folder == Path("hooks/guard")
    assert manifest.source_path == GUARD
    assert manifest.enabled is True and manifest.blocking is None


def test_defaults_fill_what_a_minimal_manifest_leaves_out() -> None:
    text = 'name = "m"\nevent = "PostToolUse"\n[action.python]\nentrypoint = "h:run"\n'
    manifest = parse_toml(text, Path("hooks/m/HOOK.toml"))
    assert manifest.priority == 100
    assert manifest.on_error == "allow"
    assert manifest.events == ["PostToolUse"]
    assert manifest.timeout_s == 10.0
    assert manifest.batch is None
    assert manifest.match.is_empty()


def test_the_manifest_is_frozen() -> None:
    manifest = parse_toml(VALID_TOML, GUARD)
    with pytest.raises(ValueError):
        manifest.priority = 5


def test_seed_000_hook_table_and_conditions_are_accepted() -> None:
    text = (
        '[hook]\nname = "legacy"\nevent = "on_session_start"\n'
        '[conditions]\nchannels = ["ops"]\n'
        '[action.prompt_inject]\ncontent = "be careful"\nposition = "prepend"\n'
    )
    manifest = parse_toml(text, Path("hooks/legacy/HOOK.toml"))
    assert manifest.events == ["SessionStart"]
    assert manifest.match.channels == ["ops"]
    assert manifest.action.prompt_inject is not None
    assert manifest.action.prompt_inject.position == "prepend"


@pytest.mark.parametrize(
    ("text", "field", "reason"),
    [
        (
            VALID_TOML.replace("timeout_secs = 3", "timeout_secs = 0"),
            "action.shell.timeout_secs",
            "must be > 0",
        ),
        (
            VALID_TOML.replace('"before_tool_call"', '"nonexistent_hook"'),
            "events",
            "unknown event kind 'nonexistent_hook'",
        ),
        (
            VALID_TOML.replace("priority = 10", 'priority = "high"'),
            "priority",
            "must be an integer",
        ),
        (VALID_TOML.replace('name = "guard"', 'name = "has space"'), "name", "must be 1-64"),
        (
            VALID_TOML.replace('on_error = "deny"', 'on_error = "explode"'),
            "on_error",
            "must be one of",
        ),
        (VALID_TOML.replace("[match]", "[match]\nsurprise = 1"), "match.surprise", "unknown field"),
        (
            VALID_TOML.replace('pattern = "rm\\\\s+-rf"', 'pattern = "(unclosed"'),
            "match.pattern",
            "not a valid regular expression",
        ),
        (VALID_TOML.replace('name = "guard"\n', ""), "name", "is required"),
        (VALID_TOML + '\n[action.http]\nurl = "https://x"\n', "action", "exactly one"),
        (
            VALID_TOML.replace('command = "./guard.sh"', 'command = ""'),
            "action.shell.command",
            "must not be empty",
        ),
    ],
)
def test_invalid_manifests_name_the_file_the_field_and_the_reason(
    text: str, field: str, reason: str
) -> None:
    with pytest.raises(ManifestError) as info:
        parse_toml(text, GUARD)
    error = info.value
    assert error.path == "hooks/guard/HOOK.toml"
    assert error.field == field
    assert reason in error.reason
    assert str(error).startswith(f"hooks/guard/HOOK.toml: {field}: ")


def test_the_issue_example_message_is_exact() -> None:
    with pytest.raises(ManifestError) as info:
        parse_toml(VALID_TOML.replace("timeout_secs = 3", "timeout_secs = 0"), GUARD)
    assert str(info.value) == "hooks/guard/HOOK.toml: action.shell.timeout_secs: must be > 0"


def test_malformed_toml_is_a_manifest_error_with_the_file() -> None:
    with pytest.raises(ManifestError, match=r"hooks/guard/HOOK.toml: not valid TOML"):
        parse_toml("name = [unclosed", GUARD)


def test_a_blocking_manifest_on_an_observe_only_kind_is_refused() -> None:
    text = (
        'name = "x"\nevents = ["LLMOutput"]\nblocking = true\n'
        '[action.python]\nentrypoint = "h:run"\n'
    )
    with pytest.raises(ManifestError, match="LLMOutput can never block"):
        parse_toml(text, GUARD)


def test_custom_kinds_from_config_are_accepted_through_the_catalogue() -> None:
    text = 'name = "c"\nevents = ["DeployStarted"]\n[action.python]\nentrypoint = "h:run"\n'
    with pytest.raises(ManifestError):
        parse_toml(text, GUARD)
    custom = DEFAULT_CATALOGUE.with_custom({"DeployStarted": True})
    assert parse_toml(text, GUARD, catalogue=custom).events == ["DeployStarted"]


def test_wake_actions_take_a_command_or_a_url_and_refuse_unknown_fields() -> None:
    text = 'name = "w"\nevents = ["Stop"]\n[action.wake]\ncommand = "notify {agent_id}"\n'
    assert parse_toml(text, GUARD).action.kind == "wake"
    unknown = 'name = "w"\nevents = ["Stop"]\n[action.wake]\nmode = "bidirectional"\n'
    with pytest.raises(ManifestError, match=r"action\.wake\.mode"):
        parse_toml(unknown, GUARD)


MICROCLAW = """---
name: block-secrets
description: Block tool calls that touch secrets
events: [BeforeToolCall]
command: "sh handler.sh"
timeout: 2
requires:
  os: [linux, darwin]
  bins: [sh]
---
# Block secrets

Longer text for people.
"""


def test_a_microclaw_hook_md_becomes_a_shell_hook_mapping_exit_1_to_deny() -> None:
    manifest = parse_markdown(MICROCLAW, Path("hooks/block-secrets/HOOK.md"))
    assert manifest.events == ["PreToolUse"]
    assert manifest.action.shell is not None
    assert manifest.action.shell.command == "sh handler.sh"
    assert manifest.timeout_s == 2.0
    assert manifest.exit_codes == {1: "deny"}
    assert manifest.requires.os == ["linux", "darwin"]
    assert manifest.form == "markdown"


def test_hook_md_errors_name_the_frontmatter_field_the_author_wrote() -> None:
    with pytest.raises(ManifestError) as info:
        parse_markdown(MICROCLAW.replace("timeout: 2", "timeout: -1"), Path("h/x/HOOK.md"))
    assert info.value.field == "timeout"
    assert info.value.reason == "must be > 0"


def test_hook_md_without_frontmatter_or_with_bad_yaml_is_reported() -> None:
    with pytest.raises(ManifestError, match="no YAML frontmatter"):
        parse_markdown("# just markdown\n", Path("h/x/HOOK.md"))
    with pytest.raises(ManifestError, match="not valid YAML"):
        parse_markdown("---\nname: [unclosed\n---\n", Path("h/x/HOOK.md"))


def test_hook_md_body_is_the_description_when_none_is_given() -> None:
    text = MICROCLAW.replace("description: Block tool calls that touch secrets\n", "")
    manifest = parse_markdown(text, Path("h/x/HOOK.md"))
    assert manifest.description == "Block secrets"


def test_split_frontmatter_returns_fields_and_body() -> None:
    parts = split_frontmatter("---\na: 1\n---\nbody\n")
    assert parts == ("a: 1", "body\n")
    assert split_frontmatter("no frontmatter") is None


SEED_001 = """id: ability_usage_tracker
event_type: PostAbilityCall
enabled: true
blocking: false

summary: >
  Track each ability call and update ability_usage.json. For slow calls,
  append to slow_abilities.log.

match:
  ability_scope: "*"
  min_duration_ms: 0

handler:
  kind: script
  command: ./scripts/hooks/ability_usage_tracker.py

effects:
  - update_usage_cache: .system/cache/ability_usage.json
  - append_to: .system/logs/slow_abilities.log
"""


def test_a_seed_001_yaml_hook_parses_into_the_same_model() -> None:
    manifest = parse_yaml(SEED_001, Path("hooks/ability_usage_tracker.yaml"))
    assert isinstance(manifest, HookManifest)
    assert manifest.name == "ability_usage_tracker"
    assert manifest.events == ["PostToolUse"]
    assert manifest.blocking is False
    assert manifest.description.startswith("Track each ability call")
    assert manifest.match.ability_scope == ["*"]
    assert manifest.action.shell is not None
    assert manifest.action.shell.command == "./scripts/hooks/ability_usage_tracker.py"
    assert len(manifest.effects) == 2
    assert manifest.folder == Path("hooks")


def test_yaml_errors_name_the_seed_001_field() -> None:
    with pytest.raises(ManifestError) as info:
        parse_yaml(SEED_001.replace("PostAbilityCall", "Bogus"), Path("hooks/a.yaml"))
    assert info.value.field == "event_type"
    with pytest.raises(ManifestError) as info:
        parse_yaml(SEED_001.replace("kind: script", "kind: carrier-pigeon"), Path("hooks/a.yaml"))
    assert info.value.field == "handler.kind"


def test_yaml_python_handlers_take_an_entrypoint() -> None:
    text = "id: p\nevent_type: PromptSubmit\nhandler:\n  kind: python\n  entrypoint: h:run\n"
    manifest = parse_yaml(text, Path("hooks/p.yaml"))
    assert manifest.action.python is not None
    assert manifest.action.python.entrypoint == "h:run"


def test_load_manifest_picks_the_form_by_file_name(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "HOOK.toml").write_text(VALID_TOML)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "HOOK.md").write_text(MICROCLAW)
    (tmp_path / "c.yaml").write_text(SEED_001)
    (tmp_path / "notes.txt").write_text("x")
    forms = [
        load_manifest(p).form
        for p in (tmp_path / "a" / "HOOK.toml", tmp_path / "b" / "HOOK.md", tmp_path / "c.yaml")
    ]
    assert forms == ["toml", "markdown", "yaml"]
    with pytest.raises(ManifestError, match="not a hook manifest"):
        load_manifest(tmp_path / "notes.txt")
    with pytest.raises(ManifestError, match="cannot read"):
        load_manifest(tmp_path / "missing" / "HOOK.toml")


def test_match_summary_reads_like_seed_001s_listing() -> None:
    manifest = parse_toml(VALID_TOML, GUARD)
    assert manifest.match.summary() == "tool=Bash tool_input.command~/rm\\s+-rf/"
    yaml_hook = parse_yaml(SEED_001, Path("hooks/a.yaml"))
    assert yaml_hook.match.summary() == "tool=* duration>=0ms"
