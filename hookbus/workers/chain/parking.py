"""Parking a request whose ``ask`` goes to an operator, and expiring what nobody decided.

When the chain's final outcome is ``ask``, the hook that asked says who answers: its
manifest's ``[approval] route``, else the fleet's ``approvals.route``. ``agent`` (the
default) answers ``ask`` as always. ``operator`` parks the request: one ``park.lua`` call,
guarded by the entry's XACK like ``reqrep.lua``, writes the approval into the partition's
inbox and sends the producer a first reply (``ask`` with ``approval.state = "pending"``), on
which it keeps waiting. From then on the request needs no worker: an operator's decision
goes from ``decide.lua`` straight to the producer's reply key.

A request with nobody waiting (no reply key) is never parked. Expiry is judged by Redis's
clock: each chain worker sweeps its partition a few times a second
(:class:`ApprovalSweeper`), as does every reader of the inbox.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from hookbus.approvals import scripts
from hookbus.approvals.inbox import LOG_MAXLEN, ApprovalInbox
from hookbus.approvals.model import ParkPlan, plan_park
from hookbus.bus import reqrep, resp
from hookbus.bus.connection import CONNECTION_ERRORS
from hookbus.bus.keys import (
    CHAIN_GROUP,
    Keys,
    approval_id,
    approval_item,
    approvals_log,
    approvals_of_agent,
    approvals_pending,
)
from hookbus.bus.policy.timeout import policy_decision
from hookbus.bus.wire import Decision, Event, encode
from hookbus.errors import HookBusError
from hookbus.workers.chain.replier import Park, Replier

if TYPE_CHECKING:
    import redis

    from hookbus.bus.settings.loader import Settings
    from hookbus.hooks.registry import HookRegistry

log = logging.getLogger(__name__)

#: How often a chain worker sweeps its partition's approvals for expiry, in seconds.
SWEEP_INTERVAL_S = 0.2
#: What a sweep may meet and shrug off until the next one: Redis away, a refused command.
_SWEEP_ERRORS: tuple[type[BaseException], ...] = (HookBusError, *CONNECTION_ERRORS)


class Route(NamedTuple):
    """Where an ``ask`` goes: the hook that asked, how long an operator has, how many
    different operators must allow it, and who may answer (empty: any operator)."""

    hook: str | None
    wait_s: int
    approvers: int
    operators: tuple[str, ...]
    notify: tuple[str, ...] = ()
    forbid_requester: bool = False


class Parking:
    """Decides whether an ``ask`` is parked, and builds the op that parks it."""

    def __init__(
        self,
        settings: Settings,
        registry: HookRegistry,
        keys: Keys,
        replier: Replier,
        worker_id: str,
        clock: reqrep.ServerClock,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.keys = keys
        self.replier = replier
        self.worker_id = worker_id
        self.clock = clock
        #: announces each parked request (``approvals.notify_url``); None: nobody to tell
        self.notifier: Any = None
        if settings.approvals.notify_url or settings.notifiers:
            from hookbus.approvals.notify import Notifier

            self.notifier = Notifier(
                settings, failed=lambda: replier.heartbeat.count("notifications_failed")
            )

    def route(self, decision: Decision) -> Route | None:
        """Who answers this ``ask`` and how, when it goes to an operator."""
        hook_id = next((run.hook_id for run in decision.trace if run.outcome == "ask"), None)
        route = self.settings.approvals.route
        wait_s = self.settings.approvals.wait_s
        approvers, operators, notify, forbid_requester = 1, (), (), False
        descriptor = self.registry.get(hook_id) if hook_id is not None else None
        spec = getattr(getattr(descriptor, "manifest", None), "approval", None)
        if spec is not None:
            route = spec.route or route
            wait_s = spec.wait_s or wait_s
            approvers, operators = spec.approvers, tuple(spec.operators)
            notify = tuple(spec.notify)
            forbid_requester = spec.forbid_requester
        if route != "operator":
            return None
        return Route(hook_id, wait_s, approvers, operators, notify, forbid_requester)

    def op(
        self, entry_id: bytes, event: Event, decision: Decision, duration_ms: float
    ) -> Park | None:
        """The op parking this request, or None to answer it as usual."""
        if decision.outcome != "ask" or decision.degraded:
            return None
        routed = self.route(decision)
        if routed is None:
            return None
        mode = reqrep.reply_mode(self.keys, event.reply_to)
        if mode == "n" or not event.reply_to:
            return None  # nobody waits for the answer: nothing to park
        hook_id, wait_s = routed.hook, routed.wait_s
        request_id = decision.request_id or event.request_id or event.id
        approval = approval_id(request_id, self.keys.partition)
        plan = plan_park(
            event,
            decision,
            approval=approval,
            hook=hook_id,
            now_ms=int(self.clock.now_ms()),
            wait_s=wait_s,
            policy=self.settings.on_timeout_for(event.kind),
            reply_to=event.reply_to,
            mode=mode,
            worker=self.worker_id,
            partition=self.keys.partition,
            approvers=routed.approvers,
            operators=routed.operators,
            forbid_requester=routed.forbid_requester,
        )
        fallback = self.replier.reply_op(entry_id, event, decision, duration_ms, guarded=True)
        cap = self.settings.approvals.max_pending_per_agent
        crowded = policy_decision(
            "crowded",
            self.settings.on_timeout_for(event.kind),
            deadline_ms=wait_s * 1000,
            request_id=request_id,
            detail=(
                f"agent {event.agent_id or '(none)'} already has {cap} approvals waiting for "
                "an operator (approvals.max_pending_per_agent)"
            ),
        )
        crowded.trace = decision.trace
        crowded.worker = self.worker_id
        return Park(
            entry_id=entry_id,
            command=self._command(entry_id, event, plan, mode, duration_ms),
            fallback=fallback,
            parked=lambda: self._announce(plan, event, routed.notify),
            crowded=self.replier.reply_op(entry_id, event, crowded, duration_ms, guarded=True),
        )

    def _command(
        self, entry_id: bytes, event: Event, plan: ParkPlan, mode: str, duration_ms: float
    ) -> bytes:
        """``park.lua`` for this request, packed (see the script for the arguments)."""
        ns, partition = self.keys.ns, self.keys.partition
        settings = self.settings
        log_maxlen = (
            0 if settings.streams.decision_log == "off" else settings.streams.decisions_maxlen
        )
        keys = (
            self.keys.requests,
            self.keys.decisions,
            event.reply_to or self.keys.requests,
            approval_item(ns, plan.approval),
            approvals_pending(ns, partition),
            approvals_log(ns, partition),
            approvals_of_agent(ns, partition, event.agent_id or ""),
        )
        args: list[bytes | str | int] = [
            CHAIN_GROUP,
            settings.streams.reply_ttl_s * 1000,
            reqrep.INBOX_MAXLEN,
            log_maxlen,
            entry_id,
            mode,
            encode(plan.first_reply),
            event.id,
            event.kind,
            self.worker_id,
            int(duration_ms * 1000),
            event.session_id or "",
            event.agent_id or "",
            plan.approval,
            plan.expires_ms,
            LOG_MAXLEN,
            settings.approvals.max_pending_per_agent,
        ]
        for name, value in plan.fields:
            args += [name, value]
        return resp.pack("EVALSHA", scripts.sha("park"), len(keys), *keys, *args)

    def _announce(self, plan: ParkPlan, event: Event, notify: tuple[str, ...] = ()) -> None:
        log.info(
            "request %s (%s) parked for an operator as approval %s",
            plan.first_reply.request_id,
            event.kind,
            plan.approval,
        )
        if self.notifier is not None:
            self.notifier.announce(plan.approval, event, plan.first_reply, notify)


class ApprovalSweeper:
    """A thread expiring one partition's approvals nobody decided in time."""

    def __init__(
        self,
        settings: Settings,
        client: redis.Redis,
        partition: int,
        clock: reqrep.ServerClock,
        stop_event: threading.Event,
    ) -> None:
        self.inbox = ApprovalInbox(settings, client)
        self.inbox.use(partition, client)
        self.partition = partition
        self.clock = clock
        self.stop_event = stop_event
        self.expired = 0
        self._thread: threading.Thread | None = None
        #: whether this process reads the partition now (only its readers sweep it)
        self.active: Callable[[], bool] = lambda: True

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._loop, name=f"approval-sweep-p{self.partition}", daemon=True
        )
        self._thread.start()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self.stop_event.wait(SWEEP_INTERVAL_S):
            if not self.active():
                continue
            try:
                self.expired += self.inbox.sweep(self.partition, self.clock.now_ms())
            except _SWEEP_ERRORS as exc:
                log.debug("approval sweep of partition %d: %s", self.partition, exc)
            except Exception:  # the sweep must never end the worker
                log.exception("approval sweep of partition %d failed", self.partition)
