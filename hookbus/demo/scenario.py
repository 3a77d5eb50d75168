"""``hookbus demo``: three scripted agents on an embedded fleet, decisions streaming by.

The demo is for the first five minutes with hookbus: nothing to install or configure. It
starts the same stack as ``hookbus dev`` (embedded server, chain / fan-out / RQ workers) on
the hooks shipped in ``hookbus/demo/hooks``, then three agents play short sessions through
:class:`~hookbus.producers.agent_session.AgentSession`: a prompt that gets a routing hint, a
denied ``rm -rf``, an edit whose path a modify hook rewrites, telemetry on the fan-out path
and a session end. Each step is reported as a :class:`Step` the caller prints.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hookbus.bus.settings.loader import Settings
from hookbus.bus.wire import Decision
from hookbus.producers.agent_session import AgentSession

#: The hooks the demo fleet serves, shipped inside the package.
DEMO_HOOKS_DIR = Path(__file__).resolve().parent / "hooks"
#: How long the demo waits for the fan-out path to record its telemetry lines, in seconds.
TELEMETRY_WAIT_S = 10.0


@dataclass(frozen=True)
class Step:
    """One thing an agent did and what the fleet answered."""

    agent: str
    kind: str
    what: str
    outcome: str
    ms: float
    detail: str = ""
    degraded: bool = False


@dataclass
class DemoResult:
    steps: list[Step] = field(default_factory=list)
    telemetry_lines: int = 0
    url: str = ""
    bundle: str | None = None


# Each agent's script: (kind, argument). "prompt" asks PromptSubmit, "tool" asks PreToolUse
# and, when allowed, publishes PostToolUse; "end" publishes SessionEnd.
SCRIPTS: dict[str, list[tuple[str, Any]]] = {
    "agent-alpha": [
        ("prompt", "Please refactor the billing module and run the tests"),
        ("tool", ("Bash", {"command": "pytest -q tests/billing"})),
        ("end", None),
    ],
    "agent-beta": [
        ("prompt", "Clean up the build folder"),
        ("tool", ("Bash", {"command": "rm -rf /"})),
        ("tool", ("Bash", {"command": "rm -rf build/"})),
        ("end", None),
    ],
    "agent-gamma": [
        ("prompt", "Fix the typo in the app"),
        ("tool", ("Edit", {"file_path": "./src//app.py", "old": "teh", "new": "the"})),
        ("end", None),
    ],
}


def _detail(decision: Decision, asked: dict[str, Any] | None) -> str:
    parts: list[str] = []
    if decision.reason:
        parts.append(decision.reason)
    new_input = decision.updated.get("tool_input")
    if isinstance(new_input, dict) and asked is not None:
        changed = {k: v for k, v in new_input.items() if asked.get(k) != v}
        parts.extend(f"rewrote {k} -> {v}" for k, v in changed.items())
    parts.extend(f"signal {s.kind}={s.code}" for s in decision.signals)
    return "; ".join(parts)


def play(
    session: AgentSession, script: list[tuple[str, Any]], report: Callable[[Step], None]
) -> None:
    """Run one agent's script, reporting each step as it happens."""
    for kind, arg in script:
        started = time.perf_counter()
        if kind == "prompt":
            decision = session.prompt(arg)
            ms = (time.perf_counter() - started) * 1000
            report(
                Step(
                    session.agent_id,
                    "PromptSubmit",
                    arg,
                    decision.outcome,
                    ms,
                    _detail(decision, None),
                    decision.degraded,
                )
            )
        elif kind == "tool":
            name, args = arg
            decision = session.before_tool(name, args)
            ms = (time.perf_counter() - started) * 1000
            what = f"{name} {args.get('command') or args.get('file_path')}"
            report(
                Step(
                    session.agent_id,
                    "PreToolUse",
                    what,
                    decision.outcome,
                    ms,
                    _detail(decision, args),
                    decision.degraded,
                )
            )
            if decision.outcome == "allow":
                final = {**args, **decision.updated.get("tool_input", {})}
                session.after_tool(name, final, "ok", duration_ms=int(ms))
        else:
            session.end()
            ms = (time.perf_counter() - started) * 1000
            report(Step(session.agent_id, "SessionEnd", "bye", "published", ms))


@contextmanager
def demo_stack(settings: Settings, release: Callable[..., Any]) -> Iterator[Any]:
    """The dev stack on the demo hooks; stopped (and its server gone) on exit."""
    from hookbus.workers.fleet.dev import DevStack

    stack = DevStack(settings=settings, hooks_dir=DEMO_HOOKS_DIR, release=release)
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()


def run_demo(
    settings: Settings,
    release: Callable[..., Any],
    report: Callable[[Step], None],
    *,
    on_ready: Callable[[DemoResult], None] | None = None,
) -> DemoResult:
    """Start the fleet, play the three agents side by side, count the telemetry lines."""
    from hookbus.producers.sync_client import HookBus

    result = DemoResult()
    lock = threading.Lock()

    def record(step: Step) -> None:
        with lock:
            result.steps.append(step)
            report(step)

    with tempfile.TemporaryDirectory(prefix="hookbus-demo-") as tmp:
        telemetry = Path(tmp) / "telemetry.jsonl"
        # The workers inherit the environment: where to write telemetry, and quiet logs (their
        # "SIGTERM received" lines at the end are noise in a demo).
        child_env = {"DEMO_TELEMETRY_FILE": str(telemetry), "HOOKBUS_LOG_LEVEL": "ERROR"}
        previous = {name: os.environ.get(name) for name in child_env}
        os.environ.update(child_env)
        try:
            with demo_stack(settings, release) as stack:
                result.url = stack.url
                result.bundle = stack.bundle_version
                if on_ready is not None:
                    on_ready(result)
                bus = HookBus.from_url(stack.url, namespace=settings.namespace)
                try:
                    threads = [
                        threading.Thread(
                            target=play,
                            args=(AgentSession(bus, agent, f"{agent}-demo"), script, record),
                            name=agent,
                        )
                        for agent, script in SCRIPTS.items()
                    ]
                    for thread in threads:
                        thread.start()
                    for thread in threads:
                        thread.join()
                finally:
                    bus.close()
                allowed_tools = sum(
                    1 for s in result.steps if s.kind == "PreToolUse" and s.outcome == "allow"
                )
                end = time.monotonic() + TELEMETRY_WAIT_S
                while time.monotonic() < end:
                    lines = telemetry.read_text().count("\n") if telemetry.exists() else 0
                    result.telemetry_lines = lines
                    if lines >= allowed_tools:
                        break
                    time.sleep(0.05)
        finally:
            for name, value in previous.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    return result
