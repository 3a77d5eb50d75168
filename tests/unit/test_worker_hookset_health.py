"""How a chain worker judges its hook set complete from its HookHost's info (issue 12 row 9)."""

from __future__ import annotations

from hookbus.workers.reload.health import incomplete_reason


def test_a_set_that_loaded_every_declared_hook_is_complete() -> None:
    assert incomplete_reason({"version": "v1", "hooks": 3, "problems": [], "refused": None}) is None


def test_a_hook_that_did_not_load_here_makes_the_set_incomplete() -> None:
    info = {"version": "v1", "problems": ["guard/HOOK.toml: module 'g' missing"], "refused": None}
    reason = incomplete_reason(info)
    assert reason is not None and "v1" in reason and "guard/HOOK.toml" in reason


def test_a_bundle_refused_at_start_leaves_no_set_and_says_why() -> None:
    refusal = "bundle v2 refused: bad signature"
    info = {"version": None, "problems": [refusal], "refused": {"reason": refusal}}
    assert incomplete_reason(info) == f"no hook set loaded ({refusal})"


def test_a_refused_newer_bundle_keeps_the_complete_set_healthy() -> None:
    older = "bundle v2 refused: bad signature"
    latest = "bundle v3 not written to /cache: disk full"
    info = {"version": "v1", "problems": [older, latest], "refused": {"reason": latest}}
    assert incomplete_reason(info) is None


def test_a_worker_with_no_hooks_at_all_is_unhealthy_and_answers_by_policy() -> None:
    # before the first reload, or after Redis came back empty: no guard decided anything
    reason = incomplete_reason({"version": None, "problems": [], "refused": None})
    assert reason == "no hook set loaded (Redis names no bundle and no hooks folder was loaded)"


def test_a_long_list_of_missing_hooks_is_summarised() -> None:
    info = {"version": "v1", "problems": [f"h{i}: missing" for i in range(5)], "refused": None}
    reason = incomplete_reason(info)
    assert reason is not None and reason.endswith("(and 2 more)")
