"""Hook actions: how a hook's work is done (python, shell, http, prompt_inject).

Each action is compiled once, at registration, into an :class:`Action`: a callable taking
the event (or a list of events for batching hooks) and a timeout in seconds, returning the
hook's raw answer (see :mod:`hookbus.hooks.results`) or raising
:class:`~hookbus.errors.HookExecutionError` / :class:`~hookbus.errors.HookTimeout`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hookbus.bus.wire import Event

EventArg = Event | list[Event]
Action = Callable[[EventArg, "float | None"], Any]

__all__ = ["Action", "EventArg", "build_action"]


def build_action(registry: Any, manifest: Any) -> tuple[Callable[..., Any], Any, str]:
    """Compile a manifest's action: ``(call, direct, handler)``.

    ``call(arg, timeout, under_deadline=False)`` runs the action; ``direct`` is the plain
    function for sync python actions (the chain's fast path) or None; ``handler`` says
    what runs, for ``hookbus hooks info``. Raises HookRegistrationError naming the hook.
    """
    from hookbus.errors import HookRegistrationError

    hook_id: str = manifest.name
    action = manifest.action
    kind = action.kind
    if kind == "python":
        from hookbus.hooks.actions.python import python_call

        py = action.python
        call = python_call(
            hook_id,
            py.entrypoint,
            manifest.folder,
            isolate=py.isolate,
            agent=bool(getattr(manifest, "agent_authored", False)),
            allow_unconfined=registry.allow_unconfined_agent_hooks,
        )
        fn = call.fn
        where = getattr(getattr(fn, "__code__", None), "co_filename", None) or getattr(
            fn, "__module__", "?"
        )
        return call, None if call.is_async else fn, f"{where}:{getattr(fn, '__name__', '?')}"
    if kind == "shell":
        from hookbus.hooks.actions.shell import ShellCall

        shell = ShellCall.from_manifest(
            manifest,
            env_allowlist=registry.env_allowlist,
            allow_unconfined_agent_hooks=registry.allow_unconfined_agent_hooks,
            agent_env_allowlist=registry.agent_policy.env_allowlist,
        )
        return shell, None, shell.describe()
    if kind == "http":
        from hookbus.hooks.actions.http import HttpCall

        http = HttpCall.from_manifest(manifest, registry=registry)
        return http, None, f"{action.http.method} {action.http.url}"
    if kind == "prompt_inject":
        from hookbus.hooks.actions.prompt import PromptInject

        inject = PromptInject(action.prompt_inject.content)
        return inject, None, f"prompt_inject ({action.prompt_inject.position})"
    if kind == "wake":
        from hookbus.hooks.actions.wake import WakeCall

        wake = WakeCall.from_manifest(manifest, registry=registry)
        return wake, None, wake.describe()
    if kind == "none":
        return _no_action, None, "no action (its fleet-wide rules only)"
    raise HookRegistrationError(hook_id, f"unknown action kind {kind!r}")


def _no_action(arg: EventArg, timeout: float | None = None, *rest: Any) -> None:
    """The action of a hook that is only its fleet-wide rules: continue."""
    return None
