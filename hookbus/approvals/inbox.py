"""The approval inbox as operators use it: list, read, decide, expire, follow.

:class:`ApprovalInbox` is the one library both ``hookbus approvals`` and the console call.
Every partition's approvals live in that partition's hash slot (on a Redis Cluster, on the
master serving it); an approval id names its partition (:func:`hookbus.bus.keys.approval_id`)
so deciding one touches one slot. A decision is taken by ``decide.lua`` alone: two operators
pressing Allow and Deny at once get one winner, and the loser is told who won.

Reading the inbox also sweeps it: items past their expiry are expired (``expire.lua``)
before they are listed, so a fleet whose chain workers are all down still answers expired
requests the moment an operator looks, and never shows a stale item as pending.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis
import redis.exceptions

from hookbus.approvals import scripts
from hookbus.approvals.model import ApprovalItem, chain_decision, operator_decision
from hookbus.bus.connection import bus_client, partition_client, translated
from hookbus.bus.ids import user_at_host
from hookbus.bus.keys import (
    Keys,
    approval_item,
    approval_partition,
    approvals_done,
    approvals_log,
    approvals_of_agent,
    approvals_pending,
)
from hookbus.bus.reqrep import INBOX_MAXLEN
from hookbus.bus.wire import encode
from hookbus.errors import (
    ApprovalClosed,
    ApprovalNotFound,
    ApprovalRefused,
    HookBusError,
    WireError,
)

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

log = logging.getLogger(__name__)

#: Approximate MAXLEN of a partition's approvals log (what live views follow).
LOG_MAXLEN = 10_000
#: Decided or expired approvals kept listed per partition (the newest).
DONE_KEPT = 1_000
#: Most due approvals one sweep of a partition expires.
SWEEP_BATCH = 100
#: Longest operator's note kept (it travels to the agent in the decision's reason).
NOTE_CHARS = 2_000


@dataclass(frozen=True)
class Decided:
    """An operator's decision as taken: the approval after it and how long it had waited."""

    item: ApprovalItem
    outcome: str
    decided_by: str
    waited_ms: int
    recorded: bool


def operator_identity(name: str | None = None) -> str:
    """``operator:<name>``: the given name, else this process's ``user@host``."""
    if name:
        return name if name.startswith("operator:") else f"operator:{name}"
    return f"operator:{user_at_host()}"


class ApprovalInbox:
    """One namespace's approval inbox, across its partitions."""

    def __init__(self, settings: Settings, client: redis.Redis | None = None) -> None:
        self.settings = settings
        self.ns = settings.namespace
        self._client = client
        self._clients: dict[int, redis.Redis] = {}

    # --- where things are ---------------------------------------------------------------

    def client(self, partition: int) -> redis.Redis:
        """The client serving a partition's slot (the given client on a single server)."""
        found = self._clients.get(partition)
        if found is None:
            if self._client is not None and (partition == 0 or self.settings.partitions == 1):
                found = self._client
            else:
                found = partition_client(self.settings, partition)
            self._clients[partition] = found
        return found

    def use(self, partition: int, client: redis.Redis) -> None:
        """Talk to ``partition`` through ``client`` (a worker's own partition client)."""
        self._clients[partition] = client

    def partitions(self) -> range:
        return range(self.settings.partitions)

    def _log_maxlen(self) -> int:
        return (
            0
            if self.settings.streams.decision_log == "off"
            else (self.settings.streams.decisions_maxlen)
        )

    # --- reading ------------------------------------------------------------------------

    def pending(self) -> list[ApprovalItem]:
        """Every approval waiting for an operator, oldest first (expired ones swept first)."""
        items: list[ApprovalItem] = []
        for partition in self.partitions():
            self.sweep(partition)
            client = self.client(partition)
            with translated(self.settings.effective_redis_url):
                ids = client.zrange(approvals_pending(self.ns, partition), 0, -1)
            items += self._read(client, ids)
        return sorted((i for i in items if i.state == "pending"), key=lambda i: i.asked_ms)

    def recent(self, limit: int = 50) -> list[ApprovalItem]:
        """The newest decided or expired approvals, newest first."""
        items: list[ApprovalItem] = []
        for partition in self.partitions():
            client = self.client(partition)
            with translated(self.settings.effective_redis_url):
                ids = client.zrevrange(approvals_done(self.ns, partition), 0, limit - 1)
            items += self._read(client, ids)
        items.sort(key=lambda i: i.decided_ms, reverse=True)
        return items[:limit]

    def get(self, approval: str) -> ApprovalItem:
        """One approval, whatever its state; :class:`ApprovalNotFound` when unknown."""
        client, key = self._where(approval)
        with translated(self.settings.effective_redis_url):
            raw = client.hgetall(key)
        if not raw:
            raise ApprovalNotFound(approval)
        return ApprovalItem.from_hash(raw)  # type: ignore[arg-type]

    def _where(self, approval: str) -> tuple[redis.Redis, str]:
        try:
            partition = approval_partition(approval)
        except ValueError:
            raise ApprovalNotFound(approval) from None
        if partition >= self.settings.partitions:
            raise ApprovalNotFound(approval)
        return self.client(partition), approval_item(self.ns, approval)

    def _read(self, client: redis.Redis, ids: Iterable[Any]) -> list[ApprovalItem]:
        names = [i.decode() if isinstance(i, bytes) else str(i) for i in ids]
        if not names:
            return []
        with translated(self.settings.effective_redis_url):
            pipe = client.pipeline(transaction=False)
            for name in names:
                pipe.hgetall(approval_item(self.ns, name))
            raws = pipe.execute()
        out = []
        for raw in raws:
            if raw:
                try:
                    out.append(ApprovalItem.from_hash(raw))
                except WireError as exc:
                    log.warning("unreadable approval skipped: %s", exc)
        return out

    # --- deciding -----------------------------------------------------------------------

    def decide(
        self,
        approval: str,
        outcome: str,
        *,
        who: str | None = None,
        note: str = "",
        via: str = "",
    ) -> Decided:
        """Allow or deny a parked request, once. The waiting producer gets the answer at
        once; the decision log and the change history record it with ``who``.

        Raises :class:`ApprovalNotFound`, or :class:`ApprovalClosed` naming who decided
        first (or saying that it expired)."""
        if outcome not in ("allow", "deny"):
            raise ValueError(f"an operator decides allow or deny, not {outcome!r}")
        note = note[:NOTE_CHARS]
        operator = operator_identity(who)
        client, key = self._where(approval)
        url = self.settings.effective_redis_url
        with translated(url):
            pipe = client.pipeline(transaction=False)
            pipe.hgetall(key)
            pipe.time()
            raw, (seconds, micros) = pipe.execute()
        if not raw:
            raise ApprovalNotFound(approval)
        item = ApprovalItem.from_hash(raw)
        if item.state != "pending":
            raise ApprovalClosed(approval, item.state, item.decided_by, item.decided_ms)
        waited_ms = max(seconds * 1000 + micros // 1000 - item.asked_ms, 0)
        # an allow that completes an approval of several operators names them all
        allowers = [*item.allowed_by, operator] if outcome == "allow" else [operator]
        final = operator_decision(
            chain_decision(raw.get(b"d")),
            item,
            outcome=outcome,
            who=" and ".join(allowers),
            note=note,
            waited_ms=waited_ms,
        )
        state = "allowed" if outcome == "allow" else "denied"
        partition = item.partition
        result = self._run(
            client,
            "decide",
            [
                key,
                approvals_pending(self.ns, partition),
                approvals_done(self.ns, partition),
                item.reply_to,
                Keys.for_partition(self.ns, partition).decisions,
                approvals_log(self.ns, partition),
                approvals_of_agent(self.ns, partition, item.agent),
            ],
            [
                state,
                operator,
                note,
                encode(final),
                self.settings.streams.reply_ttl_s * 1000,
                INBOX_MAXLEN,
                self._log_maxlen(),
                self.settings.approvals.keep_s * 1000,
                LOG_MAXLEN,
                outcome,
                DONE_KEPT,
            ],
        )
        code = int(result[0])
        if code == -2:
            raise ApprovalNotFound(approval)
        if code == -3:
            raise ApprovalRefused(
                approval,
                f"{operator} allowed it already: it needs {item.approvers} different operators",
            )
        if code == -5:
            raise ApprovalRefused(
                approval,
                f"{operator} is the asking agent's own operator identity, which this approval "
                "forbids: another operator must answer it",
            )
        if code == -4:
            names = ", ".join(_text(result[1]).split("\n"))
            raise ApprovalRefused(approval, f"{operator} may not answer it (only {names})")
        if code == 2:
            allowed = int(result[1])
            log.info(
                "approval %s allowed by %s (%d of %d)", approval, operator, allowed, item.approvers
            )
            waiting = ApprovalItem.from_hash(
                {**raw, b"allowed_by": "\n".join([*item.allowed_by, operator]).encode()}
            )
            recorded = self._record(waiting, "allow-once", operator, waited_ms, via)
            return Decided(waiting, "allow-once", operator, waited_ms, recorded)
        if code == -1:
            self.sweep(partition)
            raise ApprovalClosed(approval, "expired", None, item.expires_ms)
        if code == 0:
            by = _text(result[2]) or None
            at = int(_text(result[3]) or 0) or None
            raise ApprovalClosed(approval, _text(result[1]), by, at)
        decided = ApprovalItem.from_hash(
            {
                **raw,
                b"state": state.encode(),
                b"decided_by": operator.encode(),
                b"decided_ms": str(int(result[1])).encode(),
                b"note": note.encode(),
                b"outcome": outcome.encode(),
            }
        )
        recorded = self._record(decided, outcome, operator, waited_ms, via)
        log.info("approval %s %s by %s after %d ms", approval, state, operator, waited_ms)
        return Decided(decided, outcome, operator, waited_ms, recorded)

    def _record(
        self, item: ApprovalItem, outcome: str, who: str, waited_ms: int, via: str = ""
    ) -> bool:
        """The decision in the fleet's hash-chained change history (False, logged, when
        Redis refused: the decision itself stands)."""
        from hookbus.bundles import history

        try:
            history.append(
                bus_client(self.settings) if self._client is None else self._client,
                self.ns,
                action="decide",
                actor=who,
                hook=item.hook or "(fleet default)",
                sha256=hashlib.sha256(item.request_id.encode()).hexdigest(),
                extra={
                    "approval": item.id,
                    "outcome": outcome,
                    "waited_ms": waited_ms,
                    "note": item.note,
                    "kind": item.kind,
                    "agent": item.agent,
                    "session": item.session,
                    "tool": item.tool,
                    # the exact input the answer applied to, and who allowed it so far
                    "input_sha256": hashlib.sha256(item.full_input.encode()).hexdigest(),
                    "allowed_by": list(item.allowed_by),
                    "approvers": item.approvers,
                    "via": via,
                },
            )
        except HookBusError as exc:  # the decision stands regardless
            log.warning("approval %s: decision NOT recorded in the history: %s", item.id, exc)
            return False
        return True

    # --- expiring -----------------------------------------------------------------------

    def sweep(self, partition: int, now_ms: float | None = None) -> int:
        """Expire the partition's approvals whose time is up; how many were expired.

        ``now_ms`` (Redis's clock, estimated) picks the candidates; the script checks each
        against Redis's own TIME, so an early guess expires nothing."""
        client = self.client(partition)
        pending_key = approvals_pending(self.ns, partition)
        url = self.settings.effective_redis_url
        with translated(url):
            if now_ms is None:
                seconds, micros = client.time()
                now_ms = seconds * 1000 + micros / 1000
            due = client.zrangebyscore(pending_key, "-inf", now_ms, start=0, num=SWEEP_BATCH)
            if not due:
                return 0
            names = [d.decode() if isinstance(d, bytes) else str(d) for d in due]
            pipe = client.pipeline(transaction=False)
            for name in names:
                pipe.hget(approval_item(self.ns, name), "reply_to")
            replies = pipe.execute()
        expired = 0
        for name, reply_to in zip(names, replies, strict=True):
            reply_key = _text(reply_to) or approval_item(self.ns, name)
            expired += int(
                self._run(
                    client,
                    "expire",
                    [
                        approval_item(self.ns, name),
                        pending_key,
                        approvals_done(self.ns, partition),
                        reply_key,
                        Keys.for_partition(self.ns, partition).decisions,
                        approvals_log(self.ns, partition),
                    ],
                    [
                        self.settings.streams.reply_ttl_s * 1000,
                        INBOX_MAXLEN,
                        self._log_maxlen(),
                        self.settings.approvals.keep_s * 1000,
                        LOG_MAXLEN,
                        name,
                        DONE_KEPT,
                    ],
                )
            )
        return expired

    # --- following ----------------------------------------------------------------------

    def log_tail(self, partition: int) -> bytes:
        """The id of the newest entry of a partition's approvals log (``0-0``: none)."""
        with translated(self.settings.effective_redis_url):
            last = self.client(partition).xrevrange(approvals_log(self.ns, partition), count=1)
        return _raw_id(last[0][0]) if last else b"0-0"

    def log_since(self, partition: int, after: bytes) -> tuple[bytes, list[dict[str, str]]]:
        """The approvals log entries of a partition after ``after``: (newest id, entries)."""
        with translated(self.settings.effective_redis_url):
            found = self.client(partition).xrange(
                approvals_log(self.ns, partition), b"(" + after, "+", count=500
            )
        if not found:
            return after, []
        entries = [{_text(k): _text(v) for k, v in (fields or {}).items()} for _, fields in found]
        return _raw_id(found[-1][0]), entries

    # --- scripts ------------------------------------------------------------------------

    def _run(self, client: redis.Redis, name: str, keys: list[str], args: list[Any]) -> Any:
        """EVALSHA a script, loading it when Redis does not have it (a restart)."""
        url = self.settings.effective_redis_url
        with translated(url):
            try:
                return client.evalsha(scripts.sha(name), len(keys), *keys, *args)
            except redis.exceptions.NoScriptError:
                client.script_load(scripts.source(name))
                return client.evalsha(scripts.sha(name), len(keys), *keys, *args)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _raw_id(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()
