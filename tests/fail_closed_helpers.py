"""A fleet for the fail-closed tests: a private ``redis-server`` with the shipped ACL, a
bundle whose PromptSubmit guard denies prompts naming a secret, a chain worker, and the
ways each kind of producer asks (SDK, async SDK, ``hookbus publish --wait``, the per-event
Claude Code hook)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from hookbus import AsyncHookBus, HookBus
from hookbus.authoring import release
from hookbus.bus.keys import Keys
from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Decision, Event
from hookbus.workers.fleet.heartbeat import list_workers
from tests.acl_helpers import NS, ROOT, AclServer, acl_redis
from tests.reload_helpers import write_hook, write_shell_hook

KEYS = Keys.for_namespace(NS)
GUARD = 'if grep -q SECRET; then echo "a secret in the prompt" >&2; exit 2; fi\nexit 0'


@dataclass
class Fleet:
    server: AclServer
    work: Path
    chain: subprocess.Popen[bytes]
    env: dict[str, str] = field(default_factory=dict)

    def producer_env(self) -> dict[str, str]:
        """The environment of a producer process: the producer user, a private cache."""
        env = dict(os.environ, **self.env)
        env.update(HOOKBUS_REDIS_URL=self.server.url("hookbus-producer"), HOOKBUS_NAMESPACE=NS)
        return env

    def settings(self) -> Settings:
        return Settings(redis_url=self.server.url("hookbus-producer"), namespace=NS)


def push(server: AclServer, hooks: Path) -> str:
    with server.client("hookbus-operator") as operator:
        return release.release_folder(
            operator, Settings(namespace=NS), hooks, signing_key=None
        ).version


def guarded_hooks(root: Path) -> Path:
    folder = write_shell_hook(root, "prompt-guard", GUARD, events=("PromptSubmit",))
    manifest = folder / "HOOK.toml"
    manifest.write_text('on_error = "deny"\n' + manifest.read_text())
    return root


def unguarded_hooks(root: Path) -> Path:
    write_hook(root, "note", events=("PromptSubmit",))
    return root


@contextmanager
def fleet(work: Path) -> Iterator[Fleet]:
    """The server (BUSY after 100 ms of a script), the guarded bundle and a chain worker."""
    with acl_redis(work, "--busy-reply-threshold", "100") as server:
        version = push(server, guarded_hooks(work / "hooks"))
        env = dict(os.environ, HOOKBUS_REDIS_URL=server.url("hookbus-worker"))
        env.update(HOOKBUS_NAMESPACE=NS, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(work / "wc"))
        env.pop("HOOKBUS_VERIFY_KEY_FILE", None)
        with (work / "chain.log").open("wb") as log_out:
            chain = subprocess.Popen(
                [sys.executable, "-m", "hookbus", "worker", "--role", "chain"],
                env=env,
                cwd=work,
                stdin=subprocess.DEVNULL,
                stdout=log_out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            operator = server.client("hookbus-operator")
            deadline = time.monotonic() + 30
            while not [w for w in list_workers(operator, KEYS) if w.version == version]:
                assert chain.poll() is None, (work / "chain.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the worker never ran the pushed bundle"
                time.sleep(0.1)
            operator.close()
            yield Fleet(
                server,
                work,
                chain,
                {"XDG_CACHE_HOME": str(work / "pc"), "PYTHONPATH": str(ROOT)},
            )
        finally:
            os.killpg(chain.pid, signal.SIGCONT)
            chain.terminate()
            chain.wait(15)


def prompt_event(prompt: str) -> Event:
    return Event(kind="PromptSubmit", agent_id="bob", payload={"prompt": prompt})


def sdk_ask(bus: HookBus, prompt: str, deadline_ms: int = 800) -> Decision:
    return bus.request(prompt_event(prompt), deadline_ms=deadline_ms)


def async_ask(bus: AsyncHookBus, loop: asyncio.AbstractEventLoop, prompt: str) -> Decision:
    return loop.run_until_complete(bus.request(prompt_event(prompt), deadline_ms=800))


def cli_ask(f: Fleet, prompt: str) -> dict[str, object]:
    """``hookbus --json publish PromptSubmit --wait``: its decision as JSON."""
    payload = json.dumps({"prompt": prompt})
    done = subprocess.run(
        [
            *(sys.executable, "-m", "hookbus", "--json", "publish", "PromptSubmit"),
            *("--payload", "-", "--wait", "--deadline-ms", "800"),
        ],
        input=payload,
        env=f.producer_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout, done.stderr
    data: dict[str, object] = json.loads(done.stdout)
    return data


def hook_ask(f: Fleet, prompt: str) -> tuple[int, dict[str, object]]:
    """``hookbus claude-code hook`` on a UserPromptSubmit: (exit code, its JSON)."""
    data = {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "prompt": prompt}
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", "claude-code", "hook", "--timeout", "2"],
        input=json.dumps(data),
        env=f.producer_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    out: dict[str, object] = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, out
