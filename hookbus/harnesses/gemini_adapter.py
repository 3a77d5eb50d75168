"""Gemini CLI's row of the adapter table: its events, its output forms, its settings.

Gemini CLI (0.61) runs a command hook per event through the shell, with JSON on stdin
(``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, ``timestamp`` and the
event's own fields: ``tool_name`` / ``tool_input`` / ``tool_response``, ``prompt``,
``prompt_response`` + ``stop_hook_active``, ``llm_request``, ``source``, ``reason``,
``trigger``), and reads exit 0 + JSON on stdout. The forms hookbus answers with, all exit 0:

* a deny / block on BeforeTool, BeforeAgent, BeforeModel and AfterAgent:
  ``{"decision": "deny", "reason": ...}`` (the reason reaches the model as
  ``Tool execution blocked: <reason>``; on AfterAgent it is the next instruction, like
  Claude Code's Stop). Claude Code's ``hookSpecificOutput.permissionDecision`` is *ignored*;
* halt: ``{"continue": false, "stopReason": ...}``;
* rewritten tool input: ``hookSpecificOutput.tool_input``;
* added context on BeforeAgent, SessionStart and AfterTool:
  ``hookSpecificOutput.additionalContext``;
* a degraded decision: ``systemMessage``.

What fails open in Gemini CLI, and what hookbus does about it: exit 1, a timeout, exit 2
with an empty stderr, exit 2 with JSON on stdout all let the tool run, so the adapter only
ever answers exit 0 + JSON, its deadline stays under the entry's timeout, and the installer
appends ``|| printf <deny JSON>`` to the BeforeTool command so that a hookbus that cannot
start still denies. ``{"decision": "ask"}`` hangs a headless run, so a fleet's *ask* goes
out as a deny that says a person must confirm. With ``GITHUB_SHA`` set Gemini CLI strips
a hook's environment to PATH and HOME: the adapter then finds Redis as every entry point
does (:mod:`hookbus.bus.settings.discovery`): a hookbus.toml in the project (the hook's
working folder) or above it, a running ``hookbus dev``, or the user's config dir.
"""

from __future__ import annotations

from hookbus.harnesses.adapters import REQUEST, Adapter, Answer, Output, Route, render_unavailable

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    from typing import Any

NAME = "gemini-cli"

#: Every hook event of Gemini CLI 0.61, in lifecycle order, mapped onto the catalogue.
ROUTES: tuple[Route, ...] = (
    Route("SessionStart", mode=REQUEST),
    Route("BeforeAgent", "PromptSubmit", mode=REQUEST),
    Route("BeforeModel", "BeforeLLMCall", mode=REQUEST),
    Route("AfterModel", "LLMOutput"),
    Route("BeforeToolSelection"),
    Route("BeforeTool", "PreToolUse", mode=REQUEST, guard=True),
    Route("AfterTool", "PostToolUse"),
    Route("Notification"),
    Route("AfterAgent", "Stop", mode=REQUEST),
    Route("PreCompress", "PreCompact"),
    Route("SessionEnd"),
)

#: Gemini CLI's built-in tools -> the canonical (Claude Code) names guards are written for.
TOOLS: dict[str, str] = {
    "run_shell_command": "Bash",
    "replace": "Edit",
    "write_file": "Write",
    "read_file": "Read",
    "read_many_files": "Read",
    "glob": "Glob",
    "grep_search": "Grep",
    "search_file_content": "Grep",
    "list_directory": "LS",
    "web_fetch": "WebFetch",
    "google_web_search": "WebSearch",
    "write_todos": "TodoWrite",
}

#: Input fields that describe the session rather than the event: they go to ``meta``.
META_KEYS = ("transcript_path", "cwd", "hook_event_name", "timestamp")

#: Settings files per installer scope: Gemini CLI's ``settings.json`` ``hooks`` table.
SETTINGS = {"user": "~/.gemini/settings.json", "project": ".gemini/settings.json"}

#: Events where ``decision: "deny"`` + ``reason`` blocks (AfterAgent: continues the agent).
DENY_FORM = frozenset({"BeforeTool", "BeforeAgent", "BeforeModel", "AfterAgent"})
#: Events whose ``hookSpecificOutput.additionalContext`` Gemini CLI reads.
CONTEXT_FORM = frozenset({"BeforeAgent", "SessionStart", "AfterTool"})
#: Text of a fleet's *ask* (Gemini CLI's own ask hangs a headless run).
ASK_REASON = "a person must confirm this call ({reason}); hookbus refuses it meanwhile"


def deny(name: str, reason: str) -> dict[str, Any]:
    """Gemini CLI's deny, the same form on every event that takes one."""
    return {"decision": "deny", "reason": reason}


def render(route: Route, answer: Answer) -> Output:
    """Gemini CLI's output for ``answer`` to the event ``route``."""
    name = route.name
    if answer.unavailable is not None:
        return render_unavailable(route, answer, deny)
    out: dict[str, Any] = {}
    specific: dict[str, Any] = {}
    outcome, reason = answer.outcome, answer.reason
    if outcome == "halt":
        out["continue"] = False
        out["stopReason"] = reason or "stopped by a hookbus hook"
    elif outcome == "deny" and name in DENY_FORM:
        out.update(deny(name, reason or "denied by a hookbus hook"))
    elif outcome == "ask" and name == "BeforeTool":
        out.update(deny(name, ASK_REASON.format(reason=reason or "asked by a hookbus hook")))
    elif outcome == "allow" and name == "BeforeTool":
        new_input = answer.updated.get("tool_input")
        if isinstance(new_input, dict):
            specific["tool_input"] = new_input
    if answer.context and name in CONTEXT_FORM and outcome != "halt":
        specific["additionalContext"] = "\n".join(answer.context)
    if specific:
        out["hookSpecificOutput"] = {"hookEventName": name, **specific}
    if answer.degraded:
        out["systemMessage"] = f"hookbus: {reason or 'a failure policy decided'}"
    return Output(out or None)


ADAPTER = Adapter(
    NAME,
    label="Gemini CLI",
    binary="gemini",
    installer="hookbus.harnesses.install.gemini_cli",
    tried=("0.61.0",),
    fails_open=(
        "exit 1, exit 2 with an empty stderr, a timeout, stdout that is not JSON "
        "(the installer's shell fallback denies when hookbus does not exit 0)",
        "Claude Code's permissionDecision form is ignored",
    ),
    routes=ROUTES,
    tools=TOOLS,
    render=render,
    meta_keys=META_KEYS,
    settings=SETTINGS,
)
