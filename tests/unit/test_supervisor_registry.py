"""The agent registry (seed 003): three-tier settings per field, strict keys and values,
import/export of the recovery-registry JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fakeredis
import pytest

from hookbus.errors import AgentNotFound, AgentRegistryError
from hookbus.supervisor.agent_registry import AgentRegistry, lookup_session
from hookbus.supervisor.agent_schema import HOOK_SETTING_DEFAULTS

NS = "sup"

# Seed 003's "After" schema, as written there (one agent, partial per-agent hook_settings).
SEED_REGISTRY: dict[str, Any] = {
    "global_status_openclaw_session_id": "uuid",
    "global_status_openclaw_session_key": "agent:...",
    "hook_settings": {
        "pane_capture_lines": 120,
        "context_pressure_threshold": 50,
        "autocompact_pct": 50,
        "hook_mode": "async",
    },
    "agents": [
        {
            "agent_id": "warden",
            "enabled": True,
            "auto_wake": True,
            "topic_id": 1,
            "openclaw_session_id": "uuid",
            "working_directory": "/path",
            "tmux_session_name": "warden-main",
            "claude_resume_target": "",
            "claude_launch_command": "claude --dangerously-skip-permissions",
            "claude_post_launch_mode": "resume_then_agent_pick",
            "system_prompt": "Prefer /gsd:quick for small tasks, /gsd:debug for bugs. "
            "Make atomic commits.",
            "hook_settings": {"pane_capture_lines": 150, "hook_mode": "bidirectional"},
        }
    ],
}

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "supervisor" / "registry.json"

# A value per tier for each field, all different from each other and from the default.
TIER_VALUES: dict[str, tuple[str, str, Any, Any]] = {
    # field: (agent value text, global value text, agent value, global value)
    "pane_capture_lines": ("150", "90", 150, 90),
    "context_pressure_threshold": ("70", "60", 70, 60),
    "autocompact_pct": ("85", "75", 85, 75),
    "hook_mode": ("bidirectional", "bidirectional", "bidirectional", "bidirectional"),
}


@pytest.fixture
def registry(fake_redis: fakeredis.FakeRedis) -> AgentRegistry:
    return AgentRegistry(fake_redis, NS)


def test_the_seeds_registry_round_trips_through_import_and_export(
    registry: AgentRegistry,
) -> None:
    assert registry.import_document(json.dumps(SEED_REGISTRY)) == 1
    assert registry.export_document() == SEED_REGISTRY


def test_the_example_registry_round_trips_and_exports_agents_by_id(
    registry: AgentRegistry,
) -> None:
    original = json.loads(EXAMPLE.read_text())
    assert registry.import_document(EXAMPLE.read_text()) == 3
    exported = registry.export_document()
    assert exported == original
    # what export prints imports again to the same registry
    registry.import_document(json.dumps(exported))
    assert registry.export_document() == original


def test_the_seeds_warden_example_resolves_field_by_field(registry: AgentRegistry) -> None:
    registry.import_document(json.dumps(SEED_REGISTRY))
    registry.set_global([], unset=["context_pressure_threshold"])
    shown = registry.show("warden")
    assert shown["effective"] == {
        "pane_capture_lines": 150,
        "context_pressure_threshold": 50,
        "autocompact_pct": 50,
        "hook_mode": "bidirectional",
    }
    assert shown["source"] == {
        "pane_capture_lines": "agent",
        "context_pressure_threshold": "default",
        "autocompact_pct": "global",
        "hook_mode": "agent",
    }


@pytest.mark.parametrize("field", list(HOOK_SETTING_DEFAULTS))
@pytest.mark.parametrize("tier", ["agent", "global", "default"])
def test_every_field_resolves_from_each_tier(
    registry: AgentRegistry, field: str, tier: str
) -> None:
    agent_text, global_text, agent_value, global_value = TIER_VALUES[field]
    registry.set("a1", [("tmux_session_name", "s1")])
    if tier in ("agent", "global"):
        registry.set_global([(field, global_text)])
    if tier == "agent":
        registry.set("a1", [(field, agent_text)])
    expected = {"agent": agent_value, "global": global_value}.get(
        tier, HOOK_SETTING_DEFAULTS[field]
    )
    shown = registry.show("a1")
    assert shown["effective"][field] == expected
    assert shown["source"][field] == tier
    # every other field still comes from the built-in default
    for other, default in HOOK_SETTING_DEFAULTS.items():
        if other != field:
            assert shown["effective"][other] == default
            assert shown["source"][other] == "default"


def test_the_agent_tier_wins_over_a_different_global_value(registry: AgentRegistry) -> None:
    registry.set("a1", [("tmux_session_name", "s1"), ("hook_mode", "async")])
    registry.set_global([("hook_mode", "bidirectional")])
    shown = registry.show("a1")
    assert (shown["effective"]["hook_mode"], shown["source"]["hook_mode"]) == ("async", "agent")


def test_unsetting_an_agent_setting_lets_the_global_value_show_through(
    registry: AgentRegistry,
) -> None:
    registry.set("a1", [("tmux_session_name", "s1"), ("pane_capture_lines", "30")])
    registry.set_global([("pane_capture_lines", "40")])
    registry.set("a1", [], unset=["hook_settings.pane_capture_lines"])
    shown = registry.show("a1")
    assert (shown["effective"]["pane_capture_lines"], shown["source"]["pane_capture_lines"]) == (
        40,
        "global",
    )
    assert "hook_settings" not in registry.get("a1")


@pytest.mark.parametrize(
    ("pair", "key"),
    [
        (("pane_capure_lines", "10"), "pane_capure_lines"),
        (("colour", "red"), "colour"),
        (("pane_capture_lines", "many"), "hook_settings.pane_capture_lines"),
        (("pane_capture_lines", "0"), "hook_settings.pane_capture_lines"),
        (("context_pressure_threshold", "101"), "hook_settings.context_pressure_threshold"),
        (("autocompact_pct", "0"), "hook_settings.autocompact_pct"),
        (("hook_mode", "sync"), "hook_settings.hook_mode"),
        (("enabled", "yes"), "enabled"),
        (("topic_id", "1.5"), "topic_id"),
        (("tmux_session_name", "a:b"), "tmux_session_name"),
        (("openclaw_session_id", "--exec=evil"), "openclaw_session_id"),
        (("agent_id", "other"), "agent_id"),
    ],
)
def test_a_refused_key_or_value_is_named_and_changes_nothing(
    registry: AgentRegistry, pair: tuple[str, str], key: str
) -> None:
    registry.import_document(json.dumps(SEED_REGISTRY))
    before = registry.export_document()
    # the refused pair comes after a valid one: the valid one must not be applied either
    with pytest.raises(AgentRegistryError) as info:
        registry.set("warden", [("system_prompt", "changed"), pair])
    assert info.value.key == key
    assert key in str(info.value)
    assert registry.export_document() == before


@pytest.mark.parametrize(
    ("pair", "key"),
    [
        (("pane_capture_lines", "-1"), "hook_settings.pane_capture_lines"),
        (("tmux_session_name", "x"), "tmux_session_name"),
        (("hook_mod", "async"), "hook_mod"),
    ],
)
def test_a_refused_global_key_or_value_is_named_and_changes_nothing(
    registry: AgentRegistry, pair: tuple[str, str], key: str
) -> None:
    registry.import_document(json.dumps(SEED_REGISTRY))
    before = registry.export_document()
    with pytest.raises(AgentRegistryError) as info:
        registry.set_global([("autocompact_pct", "70"), pair])
    assert info.value.key == key
    assert registry.export_document() == before


def _mutated(change: Any) -> str:
    doc = json.loads(json.dumps(SEED_REGISTRY))
    change(doc)
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("document", "key"),
    [
        (_mutated(lambda d: d["hook_settings"].update(pane_lines=3)), "hook_settings.pane_lines"),
        (
            _mutated(lambda d: d["agents"][0]["hook_settings"].update(hook_mode="both")),
            "agents[0].hook_settings.hook_mode",
        ),
        (_mutated(lambda d: d["agents"][0].update(nickname="w")), "agents[0].nickname"),
        (_mutated(lambda d: d.update(agent_list=[])), "agent_list"),
        (
            _mutated(lambda d: d["agents"][0].pop("tmux_session_name")),
            "agents[0].tmux_session_name",
        ),
        (
            _mutated(lambda d: d["agents"].append({**d["agents"][0], "agent_id": "twin"})),
            "agents[1].tmux_session_name",
        ),
        (_mutated(lambda d: d["agents"].append(dict(d["agents"][0]))), "agents[1].agent_id"),
        (_mutated(lambda d: d["agents"][0].update(topic_id="1")), "agents[0].topic_id"),
    ],
)
def test_an_import_with_a_refused_key_is_named_and_changes_nothing(
    registry: AgentRegistry, document: str, key: str
) -> None:
    registry.set("keep", [("tmux_session_name", "keep-main")])
    before = registry.export_document()
    with pytest.raises(AgentRegistryError) as info:
        registry.import_document(document)
    assert info.value.key == key
    assert registry.export_document() == before


def test_an_import_that_is_not_json_changes_nothing(registry: AgentRegistry) -> None:
    registry.set("keep", [("tmux_session_name", "keep-main")])
    with pytest.raises(AgentRegistryError, match="not valid JSON"):
        registry.import_document("{not json")
    assert [a["agent_id"] for a in registry.agents()] == ["keep"]


def test_a_new_agent_needs_a_tmux_session(registry: AgentRegistry) -> None:
    with pytest.raises(AgentRegistryError) as info:
        registry.set("new", [("system_prompt", "x")])
    assert info.value.key == "tmux_session_name"
    assert registry.agents() == []


def test_two_agents_cannot_share_a_tmux_session(registry: AgentRegistry) -> None:
    registry.set("a1", [("tmux_session_name", "s1")])
    with pytest.raises(AgentRegistryError, match="already the session of agent 'a1'"):
        registry.set("a2", [("tmux_session_name", "s1")])
    assert [a["agent_id"] for a in registry.agents()] == ["a1"]


def test_moving_an_agent_to_another_session_moves_the_lookup(
    registry: AgentRegistry, fake_redis: fakeredis.FakeRedis
) -> None:
    registry.set("a1", [("tmux_session_name", "s1"), ("openclaw_session_id", "oc-1")])
    registry.set("a1", [("tmux_session_name", "s2")])
    assert lookup_session(fake_redis.execute_command, NS, "s1") is None
    found = lookup_session(fake_redis.execute_command, NS, "s2")
    assert found is not None
    assert (found.agent_id, found.openclaw_session_id) == ("a1", "oc-1")


def test_the_session_lookup_returns_effective_settings(
    registry: AgentRegistry, fake_redis: fakeredis.FakeRedis
) -> None:
    registry.import_document(json.dumps(SEED_REGISTRY))
    found = lookup_session(fake_redis.execute_command, NS, "warden-main")
    assert found is not None
    assert found.settings == {
        "pane_capture_lines": 150,
        "context_pressure_threshold": 50,
        "autocompact_pct": 50,
        "hook_mode": "bidirectional",
    }
    assert lookup_session(fake_redis.execute_command, NS, "stranger") is None


def test_an_unreadable_registry_entry_means_a_non_managed_session(
    registry: AgentRegistry, fake_redis: fakeredis.FakeRedis
) -> None:
    from hookbus.bus import keys

    registry.set("a1", [("tmux_session_name", "s1")])
    fake_redis.hset(keys.agents(NS), "a1", b"{broken")
    assert lookup_session(fake_redis.execute_command, NS, "s1") is None


def test_removing_an_agent_unmanages_its_session(
    registry: AgentRegistry, fake_redis: fakeredis.FakeRedis
) -> None:
    registry.set("a1", [("tmux_session_name", "s1")])
    registry.remove("a1")
    assert lookup_session(fake_redis.execute_command, NS, "s1") is None
    with pytest.raises(AgentNotFound):
        registry.show("a1")
