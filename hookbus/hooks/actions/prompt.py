"""``prompt_inject`` actions: static text added to the agent's context."""

from __future__ import annotations

from typing import Any

from hookbus.bus.wire import HookResult


class PromptInject:
    """Answers every event with the same context; where it goes (prepend / append) is the
    chain's business (``_Hook.prepend``)."""

    __slots__ = ("content", "result")

    def __init__(self, content: str) -> None:
        self.content = content
        self.result = HookResult(context=[content])

    def __call__(self, arg: Any, timeout: float | None, under_deadline: bool = False) -> HookResult:
        return HookResult(context=[self.content])
