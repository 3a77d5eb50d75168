"""The published failure policy as producers read it: what a stored value means, and the
per-user cache a fresh process falls back on when it cannot reach Redis."""

from __future__ import annotations

from pathlib import Path

from hookbus.bus.policy.guarded import FailPolicy, decode, encode


def test_a_stored_policy_reads_back_as_the_kinds_it_denies() -> None:
    assert decode(encode("v1", ["PromptSubmit", "PreToolUse", "PromptSubmit"])) == {
        "PromptSubmit",
        "PreToolUse",
    }
    assert decode(encode("v2", [])) == frozenset()  # a bundle without guards
    assert decode(None) is None  # no key: Redis lost it, keep what was known
    assert decode(b"not json") is None  # unreadable: keep what was known
    assert decode(b'{"deny": "PromptSubmit"}') is None


def test_a_fresh_process_uses_the_policy_its_user_last_saw(tmp_path: Path) -> None:
    environ = {"XDG_CACHE_HOME": str(tmp_path)}
    first = FailPolicy("ns1", environ)
    assert not first.denies("PromptSubmit")
    first.update(encode("v1", ["PromptSubmit"]).encode())
    assert first.denies("PromptSubmit")
    cached = tmp_path / "hookbus" / "failpolicy-ns1.json"
    assert cached.stat().st_mode & 0o777 == 0o600
    fresh = FailPolicy("ns1", environ)  # never read Redis: the cache file answers
    assert fresh.denies("PromptSubmit")
    assert not FailPolicy("ns2", environ).denies("PromptSubmit")  # per namespace
    first.update(b"garbage")  # an unreadable value changes nothing
    assert first.denies("PromptSubmit")
    first.update(None)  # the key is gone (Redis restarted empty): the guard holds
    assert first.denies("PromptSubmit")
    assert FailPolicy("ns1", environ).denies("PromptSubmit")
    first.update(encode("v2", []).encode())  # a bundle without the guard: the cache follows
    assert not first.denies("PromptSubmit")
    assert not FailPolicy("ns1", environ).denies("PromptSubmit")


def test_without_a_home_nothing_is_cached_and_nothing_breaks() -> None:
    policy = FailPolicy("ns", {})
    policy.update(encode("v", ["PreToolUse"]).encode())
    assert policy.denies("PreToolUse")
    assert not FailPolicy("ns", {}).denies("PreToolUse")


def test_a_degraded_allow_of_a_kind_known_to_be_guarded_is_overruled(tmp_path: Path) -> None:
    policy = FailPolicy("ns", {"XDG_CACHE_HOME": str(tmp_path)})
    policy.update(encode("v1", ["PromptSubmit"]).encode())
    assert policy.overrules("PromptSubmit", "allow", True)
    assert not policy.overrules("PromptSubmit", "allow", False)  # the hooks decided
    assert not policy.overrules("PromptSubmit", "deny", True)
    assert not policy.overrules("Stop", "allow", True)  # not guarded
