"""The failure policy is one rule (hookbus.bus.policy.failure.unanswered) and one table
(hookbus.defaults.DENY_ON_TIMEOUT_KINDS): every adapter's guard routes are exactly its
request routes of the table's kinds, and the SDK's settings, the gateway and the per-event
hook decide the same for each kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookbus.bus.policy.failure import unanswered
from hookbus.bus.policy.guarded import FailPolicy, encode, fails_closed
from hookbus.bus.settings.loader import Settings
from hookbus.defaults import DENY_ON_TIMEOUT_KINDS
from hookbus.harnesses import adapters
from hookbus.harnesses.adapters import REQUEST
from hookbus.harnesses.gateway import Gateway


def test_every_adapters_guard_routes_are_the_request_routes_of_the_tables_kinds() -> None:
    for name in adapters.names():
        routes = adapters.adapter(name).routes.values()
        guards = {r.name for r in routes if r.guard}
        table = {r.name for r in routes if r.mode == REQUEST and r.kind in DENY_ON_TIMEOUT_KINDS}
        assert guards == table, name


def test_the_rule_a_guarded_kind_then_configuration_then_the_table() -> None:
    assert unanswered("PromptSubmit", "allow", guarded=True) == "deny"
    assert unanswered("PreToolUse", "allow") == "allow"  # configured so, and not guarded
    assert unanswered("PromptSubmit", "deny") == "deny"
    assert unanswered("PreToolUse") == "deny"
    assert unanswered("PreModelSwitch") == "deny"
    assert unanswered("PromptSubmit") == "allow"


@pytest.mark.parametrize("kind", ["PreToolUse", "PermissionRequest", "PreModelSwitch", "Stop"])
def test_the_settings_the_gateway_and_the_per_event_hook_agree_on_each_kind(kind: str) -> None:
    settings = Settings()
    gateway = Gateway(settings, None, None)
    for name in adapters.names():
        for route in adapters.adapter(name).routes.values():
            if route.kind != kind or route.mode != REQUEST:
                continue
            expected = settings.on_timeout_for(kind)
            assert gateway.policy(route) == expected, (name, route)
            assert fails_closed(None, None, kind) == expected, (name, route)


def test_a_kind_the_bundle_guards_fails_closed_on_every_path(tmp_path: Path) -> None:
    guards = FailPolicy("ns", {"XDG_CACHE_HOME": str(tmp_path)})
    guards.update(encode("v1", ["PromptSubmit"]).encode())
    assert fails_closed("allow", guards, "PromptSubmit") == "deny"
    assert fails_closed(None, guards, "Stop") == "allow"
