"""``hookbus mcp``: the hooks folder as MCP tools, so any MCP-capable agent can author hooks.

Tools (stdio transport, the ``mcp`` package, 2.x ``MCPServer`` or 1.x ``FastMCP``):

- ``hooks_list``: every hook in the folder (name, events, priority, enabled, action, match),
  load problems, and per-hook audit findings and bypasses;
- ``hooks_audit``: the audit of the folder, or of one hook by name;
- ``hook_write``: :func:`~hookbus.authoring.write.write_hook` under the configured autonomy policy
  (the same gate and audit as ``hookbus hooks write``; never reloads);
- ``hooks_reload``: publishes the folder to the fleet with
  :func:`hookbus.authoring.release.release_folder` (audited again there; critical findings refuse),
  allowed unless ``autonomy.level = "readonly"``.

Every tool answers with JSON (also as structured content); refusals and errors set the
result's ``is_error`` so the agent sees that the call did not do what it asked. The ``mcp``
package is imported only when the command runs: it is an optional extra.
"""

from __future__ import annotations

import json
import logging
import typing
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hookbus.authoring.hook_tools import HookTools

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "hookbus hooks: lifecycle hooks shared by a fleet of agents. Use hooks_list and "
    "hooks_audit to inspect, hook_write to add or replace a hook (audited; refused when the "
    "autonomy policy or the audit says no, with findings saying what to change), then "
    "hooks_reload to publish the folder to every worker. hook_write never reloads by itself."
)


def build_server(settings: Settings, hooks_dir: Path) -> Any:
    """An MCP server (not yet running) exposing :class:`HookTools`."""
    try:
        from mcp.server.mcpserver import MCPServer as Server
    except ImportError:  # mcp 1.x
        from mcp.server.fastmcp import FastMCP as Server  # type: ignore[attr-defined,no-redef,unused-ignore]
    from mcp.types import CallToolResult

    tools = HookTools(settings, hooks_dir)

    def wrap(data: dict[str, Any], is_error: bool) -> CallToolResult:
        # the wire (camelCase) names validate under both the 1.x and the 2.x SDK
        return CallToolResult.model_validate(
            {
                "content": [{"type": "text", "text": json.dumps(data, indent=2, default=str)}],
                "structuredContent": data,
                "isError": is_error,
            }
        )

    server = Server(name="hookbus", instructions=INSTRUCTIONS)

    def tool(name: str, description: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register ``fn`` with its annotations resolved: this module postpones annotations,
        and the SDK evaluates them in the module's globals, where the locally imported
        ``CallToolResult`` is not."""

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            fn.__annotations__ = typing.get_type_hints(
                fn, localns={"CallToolResult": CallToolResult}
            )
            server.add_tool(fn, name=name, description=description)
            return fn

        return register

    @tool(
        name="hooks_list",
        description="List the hooks in the hooks folder: events, priority, enabled, action, "
        "match, load problems, audit findings and security bypasses.",
    )
    def hooks_list() -> CallToolResult:
        return wrap(*tools.hooks_list())

    @tool(
        name="hooks_audit",
        description="Security-audit the hooks folder, or one hook by name. Critical findings "
        "block hooks_reload; each finding says what to change.",
    )
    def hooks_audit(name: str | None = None) -> CallToolResult:
        return wrap(*tools.hooks_audit(name))

    @tool(
        name="hook_write",
        description="Write a hook into the hooks folder after the autonomy policy and the "
        "security audit allow it. Give either command (one program, no shell chaining) or "
        "script + language (sh, bash, python); the handler gets the event as JSON on stdin "
        "and may print a JSON result (exit 2 with a reason on stderr denies). You may replace "
        "only hooks you wrote. Under the supervised autonomy level the hook waits for an "
        "operator's approval (hookbus hooks approve) and reloads leave it out until then.",
    )
    def hook_write(
        name: str,
        events: list[str] | str,
        description: str = "",
        priority: int = 100,
        match: dict[str, Any] | None = None,
        command: str | None = None,
        script: str | None = None,
        language: str | None = None,
        timeout_secs: float = 10.0,
        on_error: str = "allow",
        blocking: bool | None = None,
        replace: bool = False,
    ) -> CallToolResult:
        action: dict[str, Any] = {"timeout_secs": timeout_secs}
        if command is not None:
            action["command"] = command
        if script is not None:
            action["script"] = script
        if language is not None:
            action["language"] = language
        spec: dict[str, Any] = {
            "name": name,
            "description": description,
            "events": events,
            "priority": priority,
            "match": match or {},
            "action": action,
            "on_error": on_error,
        }
        if blocking is not None:
            spec["blocking"] = blocking
        return wrap(*tools.hook_write(spec, replace=replace))

    @tool(
        name="hooks_reload",
        description="Publish the hooks folder to every worker as a new bundle (validated and "
        "audited again; refused on critical findings, and the fleet keeps its hooks).",
    )
    def hooks_reload() -> CallToolResult:
        return wrap(*tools.hooks_reload())

    return server
