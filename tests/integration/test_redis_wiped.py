"""A Redis that lost its state (restarted with nothing kept, failed over to an empty
replica, flushed): the fleet must never answer a guarded request with an unseen allow, nor
drop the events it cannot yet run. Played on the real Redis, each namespace's keys deleted
the way an empty restart leaves them, with the real HookHost, chain worker and dispatcher."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from hookbus import HookBus
from hookbus.authoring import release
from hookbus.bundles import signing
from hookbus.bus import keys as key_names
from hookbus.bus.keys import FANOUT_GROUP, Keys
from hookbus.bus.policy import guarded
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Event, HookResult
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.reload.hookset import HookHost
from tests.acl_helpers import NS
from tests.fail_closed_helpers import fleet, hook_ask, sdk_ask
from tests.reload_helpers import write_hook
from tests.wiped_helpers import chain_worker_without_hooks, wipe_namespace


@pytest.fixture
def settings(real_redis_url: str, namespace: str) -> Settings:
    return Settings(redis_url=real_redis_url, namespace=namespace)


@pytest.fixture
def registry() -> HookRegistry:
    reg = HookRegistry()
    reg.register("static", lambda event: HookResult(context=["ran:static"]), events=["PreToolUse"])
    return reg


@pytest.fixture
def hosts(registry: HookRegistry, settings: Settings, tmp_path: Path) -> Iterator[Any]:
    """Makes verifying hosts sharing one private cache folder (a worker and its restarts)."""
    made: list[HookHost] = []

    def make(pair: signing.KeyPaths) -> HookHost:
        key = signing.load_verify_key(pair.verify)
        host = HookHost(
            registry, settings, hooks_dir=None, cache_dir=tmp_path / "cache", verify_key=key
        )
        made.append(host)
        return host

    yield make
    for host in made:
        host.stop()


def push_guard(client: redis.Redis, settings: Settings, root: Path, key: Any) -> str:
    """A bundle whose PromptSubmit hook is a declared guard."""
    folder = write_hook(root, "guard", events=("PromptSubmit", "PreToolUse"), text="ran:guard")
    manifest = folder / "HOOK.toml"
    manifest.write_text("guard = true\n" + manifest.read_text())
    return release.release_folder(client, settings, root, signing_key=key).version


def stored_policy(client: redis.Redis, ns: str) -> frozenset[str] | None:
    return guarded.decode(client.get(key_names.fail_policy(ns)))


def fanout_group(client: redis.Redis, keys: Keys) -> dict[str, Any]:
    groups: list[dict[str, Any]] = client.xinfo_groups(keys.events)  # type: ignore[assignment]
    (group,) = [g for g in groups if g["name"] == FANOUT_GROUP.encode()]
    return group


def ran(registry: HookRegistry) -> list[str]:
    decision = registry.run(Event(kind="PreToolUse", payload={"tool_name": "Bash"}))
    return [c for c in decision.context if c.startswith("ran:") and c != "ran:static"]


def test_a_restarted_verifying_worker_serves_its_last_bundle_when_redis_names_none(
    hosts: Any, registry: HookRegistry, settings: Settings, real_redis: redis.Redis,
    namespace: str, tmp_path: Path,
) -> None:  # fmt: skip
    pair = signing.generate_keys(tmp_path / "keys")
    good = push_guard(
        real_redis, settings, tmp_path / "hooks", signing.load_signing_key(pair.signing)
    )
    first = hosts(pair)
    first.start(real_redis)
    assert first.version == good
    first.stop()
    registry.replace_dynamic([], version=None)  # the process is gone: so are its hooks
    wipe_namespace(real_redis, namespace)
    restarted = hosts(pair)
    restarted.start(real_redis)
    assert (restarted.version, ran(registry)) == (good, ["ran:guard"])
    # and the failure policy producers need is back, from the bundle it serves
    assert stored_policy(real_redis, namespace) == {"PromptSubmit", "PreToolUse"}


def test_a_worker_serving_a_bundle_puts_the_lost_policy_back_but_never_over_a_reload(
    hosts: Any, settings: Settings, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    pair = signing.generate_keys(tmp_path / "keys")
    push_guard(real_redis, settings, tmp_path / "hooks", signing.load_signing_key(pair.signing))
    host = hosts(pair)
    host.start(real_redis)
    # checked by hand from here: the host's own poll would put the policy back before the
    # test could see it gone
    host.stop()
    wipe_namespace(real_redis, namespace)
    assert stored_policy(real_redis, namespace) is None
    host.check_now()
    assert stored_policy(real_redis, namespace) == {"PromptSubmit", "PreToolUse"}
    real_redis.set(key_names.fail_policy(namespace), guarded.encode("v9", ["Stop"]))
    host.check_now()  # the stamp is still missing, but a policy is stored: left alone
    assert stored_policy(real_redis, namespace) == {"Stop"}


def test_a_chain_worker_with_no_hooks_at_all_answers_degraded_never_a_plain_allow(
    real_redis_url: str, namespace: str, tmp_path: Path
) -> None:
    with (
        chain_worker_without_hooks(real_redis_url, namespace, tmp_path),
        HookBus.from_url(real_redis_url, namespace) as bus,
    ):
        tool = bus.request(Event(kind="PreToolUse", payload={"tool_name": "Bash"}))
        prompt = bus.request(Event(kind="PromptSubmit", payload={"prompt": "hi"}))
    assert (tool.outcome, tool.degraded) == ("deny", True)
    assert "no hook set loaded" in tool.reason
    assert (prompt.outcome, prompt.degraded) == ("allow", True)  # flagged, not unseen


def test_a_producer_that_knows_a_kind_is_guarded_denies_a_worker_s_degraded_allow(
    real_redis_url: str, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unsigned worker restarted after Redis lost everything has no hooks and no policy
    to read: it answers PromptSubmit allow, degraded. The producer saw the policy before."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "producer-cache"))
    guarded.write_cached(guarded.cache_path(namespace), frozenset({"PromptSubmit"}))
    with (
        chain_worker_without_hooks(real_redis_url, namespace, tmp_path),
        HookBus.from_url(real_redis_url, namespace) as bus,
    ):
        prompt = bus.request(Event(kind="PromptSubmit", payload={"prompt": "hi"}))
    assert (prompt.outcome, prompt.degraded) == ("deny", True)
    assert "no hook set loaded" in prompt.reason and guarded.GUARDED_NOTE in prompt.reason


def test_a_dispatcher_with_no_hooks_leaves_the_events_for_the_first_hook_set(
    real_redis: redis.Redis, settings: Settings, namespace: str, tmp_path: Path
) -> None:
    from hookbus.workers.fanout.role import run_dispatcher

    stop = threading.Event()
    thread = threading.Thread(
        target=run_dispatcher, args=(settings,), kwargs={"stop_event": stop}, daemon=True
    )
    thread.start()
    keys = Keys.for_namespace(namespace)
    try:
        with HookBus.from_settings(settings) as bus:
            for n in range(5):
                bus.publish(Event(kind="PostToolUse", payload={"n": n}))
        time.sleep(1.0)
        (group,) = [
            g for g in real_redis.xinfo_groups(keys.events) if g["name"] == FANOUT_GROUP.encode()
        ]
        assert group["lag"] == 5, group  # none read, none acked away
        write_hook(tmp_path / "hooks", "after", events=("PostToolUse",))
        release.release_folder(real_redis, settings, tmp_path / "hooks", signing_key=None)
        deadline = time.monotonic() + 10
        while True:
            (group,) = [
                g
                for g in real_redis.xinfo_groups(keys.events)
                if g["name"] == FANOUT_GROUP.encode()
            ]
            if group["lag"] == 0 and group["pending"] == 0:
                break
            assert time.monotonic() < deadline, group
            time.sleep(0.1)
        assert real_redis.llen(f"rq:queue:{keys.rq_queue}") >= 1  # the hook's job went out
    finally:
        stop.set()
        thread.join(15)


def test_the_hookbus_worker_command_says_what_requests_get_without_hooks(
    real_redis_url: str, namespace: str, tmp_path: Path
) -> None:
    with chain_worker_without_hooks(real_redis_url, namespace, tmp_path) as log_file:
        pass
    text = log_file.read_text()
    assert "no hooks loaded" in text and "answered by the failure policy (degraded)" in text, text
    assert "empty chain's answer (allow)" not in text


def test_after_redis_restarts_empty_a_guarded_prompt_is_never_allowed(tmp_path: Path) -> None:
    """The shipped ACL, a real ``redis-server`` restarted with nothing kept, a chain worker
    stalled across the restart: the producers that saw the policy keep failing closed; once
    the worker runs again it writes the policy back, for producers that never saw it."""
    with fleet(tmp_path) as f, HookBus.from_settings(f.settings()) as bus:
        assert sdk_ask(bus, "hello").degraded is False  # the policy read with the heartbeats
        assert hook_ask(f, "hello")[0] == 0  # the per-event hook keeps it in its cache file
        os.killpg(f.chain.pid, signal.SIGSTOP)
        try:
            f.server.restart_empty()
            sdk = sdk_ask(bus, "hello")
            code, out = hook_ask(f, "hello")
        finally:
            os.killpg(f.chain.pid, signal.SIGCONT)
        assert (sdk.outcome, sdk.degraded) == ("deny", True), sdk.reason
        assert code == 0 and out.get("decision") == "block", out
        operator = f.server.client("hookbus-operator")
        deadline = time.monotonic() + 15
        while stored_policy(operator, NS) is None:
            assert f.chain.poll() is None
            assert time.monotonic() < deadline, "the worker never wrote the policy back"
            time.sleep(0.1)
        assert stored_policy(operator, NS) == {"PromptSubmit"}
        operator.close()
        os.killpg(f.chain.pid, signal.SIGSTOP)
        try:
            f.env["XDG_CACHE_HOME"] = str(tmp_path / "never-saw-it")
            code, out = hook_ask(f, "hello")  # a producer with no copy of its own
        finally:
            os.killpg(f.chain.pid, signal.SIGCONT)
        assert code == 0 and out.get("decision") == "block", out
