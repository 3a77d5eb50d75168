"""Ready-made hook functions for guards written against canonical tool names.

``deny_tool`` denies whatever its manifest's ``match`` selects. With ``tools_except`` it
makes a tool allowlist without writing code::

    name = "tool-allowlist"
    events = ["PreToolUse"]
    [match]
    tools_except = ["Read", "Grep", "Glob", "Bash"]
    [action.python]
    entrypoint = "hookbus.harnesses.guards:deny_tool"

Tool names are the canonical ones (Claude Code's; the adapters map other agent CLIs' names
onto them), so one allowlist holds on every harness.
"""

from __future__ import annotations

from typing import Any


def deny_tool(event: Any) -> dict[str, str]:
    """Deny the call, naming the tool (the match decided it is not allowed)."""
    tool = event.payload.get("tool_name") or event.payload.get("ability_id") or "this tool"
    return {
        "outcome": "deny",
        "reason": f"refused: {tool} is not on this fleet's tool allowlist; use an allowed tool",
    }


def ask_tool(event: Any) -> dict[str, str]:
    """Ask about the call: with ``[approval] route = "operator"`` an operator decides it
    (``hookbus approvals``, the console), else the agent's own user is asked."""
    tool = event.payload.get("tool_name") or event.payload.get("ability_id") or "this tool"
    data = event.payload.get("tool_input")
    command = data.get("command") if isinstance(data, dict) else None
    what = f"{tool}: {command}" if isinstance(command, str) else str(tool)
    return {"outcome": "ask", "reason": f"a person must approve {what}"}
