"""Hook actions: how a hook's work is done, one module per action kind's callable.

Each action is built once, at registration, into an :class:`Action`: a callable taking
the event (or a list of events for batching hooks) and a timeout in seconds, returning the
hook's raw answer (see :mod:`hookbus.hooks.results`) or raising
:class:`~hookbus.errors.HookExecutionError` / :class:`~hookbus.errors.HookTimeout`. Which
kinds exist and which module builds each is the table in :mod:`hookbus.hooks.actions.kinds`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hookbus.bus.wire import Event

EventArg = Event | list[Event]
Action = Callable[[EventArg, "float | None"], Any]

__all__ = ["Action", "EventArg"]
