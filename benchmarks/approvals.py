"""Approval inbox benchmark: from an operator's click to the waiting agent's answer.

Run: ``python benchmarks/approvals.py [--redis-url URL] [--runs N]``

In one run, on one Redis, one chain worker whose guard asks and routes every ask to the
operator, and one ``hookbus console``: a ``HookBus.request`` waits on a parked request;
the operator decides it, and the time from the decision's start to the agent call's return
is measured, interleaved, three ways:

(a) a click on **Allow** in the console's Approvals page (headless Chromium via playwright,
    a real mouse press and release: the button's fetch, the console's API, ``decide.lua``,
    the producer's inbox);
(b) ``POST /api/approvals/{id}`` with the bearer token (the same API without the browser);
(c) ``ApprovalInbox.decide`` in-process (the library alone: two round trips and a script).

Prints p50 / p90 / max per way, and the park time (request sent to parked, as the operator
would first see it in ``approvals list``) for context. Needs Debian's chromium.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import redis
from playwright.sync_api import Error as PlaywrightError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hookbus import HookBus  # noqa: E402
from hookbus.approvals.inbox import ApprovalInbox  # noqa: E402
from hookbus.bus.keys import namespace_pattern  # noqa: E402
from hookbus.bus.wire import Event  # noqa: E402
from tests.approval_helpers import (  # noqa: E402
    ask_payload,
    settings_for,
    start_worker,
    stop_worker,
    wait_alive,
    wait_for,
)
from tests.console_helpers import TOKEN, ConsoleProc, chromium  # noqa: E402


def one(bus: HookBus, inbox: ApprovalInbox, decide: Any) -> tuple[float, float]:
    """Park one request, decide it with ``decide(item_id)``; (park s, click-to-answer s)."""
    out: list[float] = []
    sent = time.perf_counter()

    def ask() -> None:
        decision = bus.request(Event(kind="PreToolUse", payload=ask_payload("make deploy")))
        out.append(time.perf_counter())
        assert decision.outcome == "allow", decision

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    items = wait_for(lambda: inbox.pending(), 15, "the parked request")
    parked_at = time.perf_counter()
    started = decide(items[0].id)
    thread.join(15)
    return parked_at - sent, out[0] - started


def quantiles(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p90 = ms[int(len(ms) * 0.9) - 1] if len(ms) >= 10 else ms[-1]
    return f"p50 {statistics.median(ms):7.1f} ms  p90 {p90:7.1f} ms  max {ms[-1]:7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    ns = f"bench{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(args.redis_url, protocol=2)
    settings = settings_for(args.redis_url, ns)
    worker = start_worker(args.redis_url, ns, wait_s=60)
    console = None
    results: dict[str, list[float]] = {"click": [], "api": [], "library": []}
    parks: list[float] = []
    try:
        wait_alive(client, ns, worker)
        with tempfile.TemporaryDirectory() as tmp:
            console = ConsoleProc(args.redis_url, ns, Path(tmp), operator="bench")
            inbox = ApprovalInbox(settings)
            with (
                chromium() as browser,
                HookBus.from_settings(settings) as bus,
                httpx.Client(
                    base_url=console.base, headers={"Authorization": f"Bearer {TOKEN}"}
                ) as api,
            ):
                page = browser.new_page()
                page.goto(f"{console.base}/?token={TOKEN}")
                page.goto(f"{console.base}/approvals")
                page.wait_for_selector("#live-status.ok", timeout=10_000)

                def click(approval: str) -> float:
                    # a locator, re-found at the click: the live region may have been
                    # re-rendered since the button appeared
                    button = page.locator(f'[data-approval="{approval}"] button[data-decide=allow]')
                    for _ in range(50):
                        button.wait_for(timeout=10_000)
                        page.wait_for_timeout(50)  # let a re-render after the park settle
                        started = time.perf_counter()
                        try:
                            # a real mouse press and release (CDP), without playwright's
                            # wait for two stable animation frames (not the operator's time)
                            button.click(force=True, timeout=2_000)
                            return started
                        except PlaywrightError:  # re-rendered under the pointer: again
                            continue
                    raise RuntimeError(f"could not click Allow on {approval}")

                def post(approval: str) -> float:
                    started = time.perf_counter()
                    api.post(f"/api/approvals/{approval}", json={"decision": "allow"})
                    return started

                def library(approval: str) -> float:
                    started = time.perf_counter()
                    inbox.decide(approval, "allow", who="bench")
                    return started

                ways = {"click": click, "api": post, "library": library}
                for _ in range(2):  # warm-up: connections, the page's scripts
                    for way in ways.values():
                        one(bus, inbox, way)
                for n in range(args.runs):
                    for name, way in ways.items():
                        park, lag = one(bus, inbox, way)
                        results[name].append(lag)
                        parks.append(park)
                    if (n + 1) % 10 == 0:
                        print(f"  {n + 1}/{args.runs} runs", file=sys.stderr)
    finally:
        if console is not None:
            console.stop()
        stop_worker(worker)
        keys = list(client.scan_iter(match=namespace_pattern(ns), count=1000))
        if keys:
            client.delete(*keys)
    print(f"approval inbox, {args.runs} runs each, interleaved ({time.strftime('%Y-%m-%d %H:%M')})")
    print(f"(a) click Allow in the console -> agent answered: {quantiles(results['click'])}")
    print(f"(b) POST /api/approvals/ID     -> agent answered: {quantiles(results['api'])}")
    print(f"(c) ApprovalInbox.decide       -> agent answered: {quantiles(results['library'])}")
    print(f"    request sent -> seen parked (polled 10 ms):   {quantiles(parks)}")


if __name__ == "__main__":
    main()
