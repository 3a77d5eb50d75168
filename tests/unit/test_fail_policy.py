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
    assert decode(None) == frozenset()  # no bundle: nothing published, nothing guarded
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
    first.update(None)  # the guard was removed: the cache follows
    assert not FailPolicy("ns1", environ).denies("PromptSubmit")


def test_without_a_home_nothing_is_cached_and_nothing_breaks() -> None:
    policy = FailPolicy("ns", {})
    policy.update(encode("v", ["PreToolUse"]).encode())
    assert policy.denies("PreToolUse")
    assert not FailPolicy("ns", {}).denies("PreToolUse")
