"""The agent registry, stored in Redis so that every host of a fleet sees the same agents.

Three keys per namespace (built in :mod:`hookbus.bus.keys`): a hash of agent entries by agent id
(each entry the JSON object of an ``agents[]`` item of the recovery registry), a hash indexing
them by tmux session name (what a hook knows about itself), and a string with the global part
(``hook_settings``, ``global_status_openclaw_session_*``).

Every write validates first (:mod:`hookbus.supervisor.agent_schema`) and then changes the
keys in one ``MULTI``/``EXEC`` under ``WATCH``: a refused change leaves the registry exactly
as it was, and two concurrent ``hookbus agents set`` never lose each other's update.

The read the hook path makes on every wake-worthy event is
:func:`hookbus.supervisor.agent_lookup.lookup_session` (no redis-py, no logging: it runs in
a process started per event); :meth:`AgentRegistry.by_session` is the same read here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hookbus.bus import keys
from hookbus.errors import AgentNotFound, AgentRegistryError
from hookbus.supervisor.agent_lookup import ManagedAgent, decode_text, load_json, lookup_session
from hookbus.supervisor.agent_schema import (
    apply_assignments,
    apply_global_assignments,
    check_unique,
    parse_registry,
    registry_document,
    resolve_settings,
)

if TYPE_CHECKING:
    import redis
    from redis.client import Pipeline

__all__ = ["AgentRegistry", "ManagedAgent", "lookup_session"]

#: How often a write retries when another writer changed the registry meanwhile.
_WATCH_RETRIES = 20


def _dump(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class AgentRegistry:
    """Read and change the agent registry of one namespace (redis-py client)."""

    def __init__(self, client: redis.Redis, ns: str) -> None:
        self.client = client
        self.ns = ns
        self.agents_key = keys.agents(ns)
        self.sessions_key = keys.agent_sessions(ns)
        self.global_key = keys.agents_global(ns)

    # --- reads ----------------------------------------------------------------------

    def global_part(self) -> dict[str, Any]:
        return load_json(self.client.get(self.global_key), "global part")

    def agents(self) -> list[dict[str, Any]]:
        """Every agent entry, by agent id."""
        raw: dict[Any, Any] = self.client.hgetall(self.agents_key)
        entries = [load_json(value, "agent entry") for value in raw.values()]
        return sorted(entries, key=lambda a: str(a.get("agent_id", "")))

    def get(self, agent_id: str) -> dict[str, Any]:
        raw = self.client.hget(self.agents_key, agent_id)
        if raw is None:
            raise AgentNotFound(agent_id)
        return load_json(raw, "agent entry")

    def by_session(self, session_name: str) -> ManagedAgent | None:
        return lookup_session(self.client.execute_command, self.ns, session_name)

    def show(self, agent_id: str) -> dict[str, Any]:
        """An agent's entry, its effective hook settings and the tier each came from."""
        entry = self.get(agent_id)
        resolved = resolve_settings(entry, self.global_part())
        return {
            "agent": entry,
            "effective": {key: value for key, (value, _src) in resolved.items()},
            "source": {key: src for key, (_value, src) in resolved.items()},
        }

    def export_document(self) -> dict[str, Any]:
        """The registry as a recovery-registry JSON object (:func:`registry_document`)."""
        return registry_document(self.global_part(), self.agents())

    # --- writes ---------------------------------------------------------------------

    def set(
        self, agent_id: str, assignments: list[tuple[str, str]], unset: list[str] | None = None
    ) -> dict[str, Any]:
        """Change (or create) one agent; returns the new entry. A new agent needs a
        ``tmux_session_name``. Nothing changes when any assignment is refused."""
        unset = list(unset or [])

        def change(pipe: Pipeline) -> dict[str, Any]:
            raw = pipe.hget(self.agents_key, agent_id)
            if raw is None:
                base: dict[str, Any] = {"agent_id": agent_id}
                if not any(key == "tmux_session_name" for key, _ in assignments):
                    raise AgentRegistryError(
                        f"tmux_session_name: agent {agent_id!r} is new; give "
                        "tmux_session_name=NAME to create it",
                        key="tmux_session_name",
                    )
            else:
                base = load_json(raw, "agent entry")
            entry = apply_assignments(base, assignments, unset)
            owner = decode_text(pipe.hget(self.sessions_key, entry["tmux_session_name"]))
            if owner is not None and owner != agent_id:
                raise AgentRegistryError(
                    f"tmux_session_name: {entry['tmux_session_name']!r} is already the session "
                    f"of agent {owner!r} (one session wakes one supervisor)",
                    key="tmux_session_name",
                )
            old_session = base.get("tmux_session_name") if raw is not None else None
            pipe.multi()
            if old_session and old_session != entry["tmux_session_name"]:
                pipe.hdel(self.sessions_key, old_session)
            pipe.hset(self.agents_key, agent_id, _dump(entry))
            pipe.hset(self.sessions_key, entry["tmux_session_name"], agent_id)
            return entry

        result: dict[str, Any] = self._transaction(change)
        return result

    def set_global(
        self, assignments: list[tuple[str, str]], unset: list[str] | None = None
    ) -> dict[str, Any]:
        """Change the global part (global ``hook_settings``...); returns it."""
        unset = list(unset or [])

        def change(pipe: Pipeline) -> dict[str, Any]:
            current = load_json(pipe.get(self.global_key), "global part")
            new = apply_global_assignments(current, assignments, unset)
            pipe.multi()
            pipe.set(self.global_key, _dump(new))
            return new

        result: dict[str, Any] = self._transaction(change)
        return result

    def remove(self, agent_id: str) -> None:
        """Delete one agent (and its session index entry)."""

        def change(pipe: Pipeline) -> None:
            raw = pipe.hget(self.agents_key, agent_id)
            if raw is None:
                raise AgentNotFound(agent_id)
            entry = load_json(raw, "agent entry")
            pipe.multi()
            pipe.hdel(self.agents_key, agent_id)
            session = entry.get("tmux_session_name")
            if isinstance(session, str):
                pipe.hdel(self.sessions_key, session)

        self._transaction(change)

    def import_document(self, text: str | bytes) -> int:
        """Replace the whole registry with a recovery-registry JSON document; returns the
        number of agents. The document is validated in full before anything is written."""
        global_part, agents = parse_registry(text)
        check_unique(agents)
        with self.client.pipeline(transaction=True) as pipe:
            pipe.delete(self.agents_key, self.sessions_key, self.global_key)
            if global_part:
                pipe.set(self.global_key, _dump(global_part))
            if agents:
                pipe.hset(self.agents_key, mapping={a["agent_id"]: _dump(a) for a in agents})
                pipe.hset(
                    self.sessions_key,
                    mapping={a["tmux_session_name"]: a["agent_id"] for a in agents},
                )
            pipe.execute()
        return len(agents)

    def _transaction(self, change: Callable[[Any], Any]) -> Any:
        import redis

        for _ in range(_WATCH_RETRIES):
            with self.client.pipeline(transaction=True) as pipe:
                try:
                    pipe.watch(  # type: ignore[no-untyped-call]
                        self.agents_key, self.sessions_key, self.global_key
                    )
                    result = change(pipe)
                    pipe.execute()
                    return result
                except redis.WatchError:
                    continue
        raise AgentRegistryError("the agent registry kept changing under this write; try again")
