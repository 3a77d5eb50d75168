"""GitHub Copilot CLI's row of the adapter table: its events, its output forms, its hooks file.

Copilot CLI (1.0.102) runs command hooks listed in ``~/.copilot/hooks/*.json`` (or a
project's ``.github/hooks/*.json``, in a trusted folder only: elsewhere they are skipped
silently) as ``{"version": 1, "hooks": {"<Event>": [{"type": "command", "bash": ...,
"timeoutSec": N}]}}``. Registered under Claude Code's PascalCase names, an event arrives on
stdin in Claude Code's shape (``hook_event_name``, ``session_id``, ``cwd``, ``tool_name:
"Bash"``, ``tool_input``...); the PermissionRequest of 1.0.102 still arrives in Copilot's own
camelCase shape (``hookName: "permissionRequest"``, ``sessionId``, ``toolName: "bash"``,
``toolInput``), which :func:`normalize` turns into the common one. A subagent's events carry
the child's id as the session and the real session as ``parentAgentId``: the session becomes
the parent's, the child's id the agent id.

The answers hookbus prints, all exit 0 (what was tried against the binary):

* PreToolUse deny: ``{"permissionDecision": "deny", "permissionDecisionReason": ...}``; the
  model reads ``Denied by preToolUse hook: <reason>``;
* PermissionRequest deny: ``{"behavior": "deny", "message": ...}`` (Claude Code's
  ``hookSpecificOutput.decision`` form is ignored there);
* UserPromptSubmit, Stop, SubagentStop: ``{"decision": "block", "reason": ...}`` (a blocked
  prompt ends ``copilot -p`` with exit 1 and the reason on stderr);
* halt: ``{"continue": false, "stopReason": ...}``; a fleet's *ask* and a rewritten input
  go out as a deny that says why (neither is applied headless);
* added context on SessionStart and UserPromptSubmit: ``hookSpecificOutput.additionalContext``;
* a degraded decision: ``systemMessage``;
* input that cannot be read (nested too deeply, over the gateway's size or rate): the deny
  form of the event it names, ``hookName`` of the camelCase shape included (a
  PermissionRequest answered ``decision: block`` would be ignored).

What fails open: a timeout and stdout that is not JSON let the tool run; any non-zero exit
denies a tool call, but with Copilot's own text instead of the fleet's reason. So the adapter
only answers exit 0 + JSON, its deadline stays under ``timeoutSec``, and the installer ends
the guards' commands with ``|| printf '<deny JSON>'`` so that a hookbus that cannot start
still denies with a reason that says so.
"""

from __future__ import annotations

from hookbus.harnesses import adapters
from hookbus.harnesses.adapters import REQUEST, Adapter, Answer, Output, Route, render_unavailable

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    from typing import Any

NAME = "copilot"

#: The events of Copilot CLI 1.0.102 under Claude Code's names, in lifecycle order. The ones
#: marked ``install=False`` are documented but were not seen to fire under these names.
ROUTES: tuple[Route, ...] = (
    Route("SessionStart", mode=REQUEST),
    Route("UserPromptSubmit", "PromptSubmit", mode=REQUEST),
    Route("PreToolUse", mode=REQUEST, guard=True),
    Route("PermissionRequest", mode=REQUEST, guard=True),
    Route("PostToolUse"),
    Route("Notification", install=False),
    Route("SubagentStop", mode=REQUEST, install=False),
    Route("Stop", mode=REQUEST),
    Route("SessionEnd"),
)

#: Copilot CLI's tool names -> the canonical (Claude Code) names guards are written for.
TOOLS: dict[str, str] = {
    "bash": "Bash",
    "powershell": "Bash",
    "view": "Read",
    "create": "Write",
    "edit": "Edit",
    "glob": "Glob",
    "grep": "Grep",
    "task": "Task",
}

#: Input fields that describe the session rather than the event: they go to ``meta``.
META_KEYS = ("transcript_path", "cwd", "hook_event_name", "timestamp", "hookName")

#: Hooks files per installer scope (a file of hookbus's own in each hooks folder).
SETTINGS = {"user": "~/.copilot/hooks/hookbus.json", "project": ".github/hooks/hookbus.json"}

#: Events whose ``decision: "block"`` + ``reason`` blocks (Stop: continues the agent).
BLOCK_FORM = frozenset({"UserPromptSubmit", "Stop", "SubagentStop"})
#: Events whose ``hookSpecificOutput.additionalContext`` is passed on.
CONTEXT_FORM = frozenset({"SessionStart", "UserPromptSubmit"})
ASK_REASON = "a person must confirm this call ({reason}); hookbus refuses it meanwhile"
REWRITE_REASON = (
    "a hookbus hook rewrote this call, which Copilot CLI cannot apply; run this input "
    "instead: {input}"
)

#: Copilot's camelCase input fields -> the common (snake_case) ones.
_FIELDS = {
    "sessionId": "session_id",
    "toolName": "tool_name",
    "toolInput": "tool_input",
    "toolArgs": "tool_input",
    "toolResult": "tool_response",
    "transcriptPath": "transcript_path",
    "stopReason": "stop_reason",
    "initialPrompt": "initial_prompt",
    "parentAgentId": "parent_agent_id",
}


def normalize(data: dict[str, Any]) -> dict[str, Any]:
    """Copilot's own input shape as the common one: camelCase fields renamed, the event
    named from ``hookName``, and a subagent's event filed under its parent's session."""
    hook_name = data.get("hookName")
    if "hook_event_name" not in data and isinstance(hook_name, str) and hook_name:
        data["hook_event_name"] = hook_name[0].upper() + hook_name[1:]
    for camel, snake in _FIELDS.items():
        if camel in data and snake not in data:
            data[snake] = data.pop(camel)
    parent = data.get("parent_agent_id")
    if isinstance(parent, str) and parent and parent != data.get("session_id"):
        child = data.get("session_id")
        data["session_id"] = parent
        if isinstance(child, str) and child and "agent_id" not in data:
            data["agent_id"] = child
    return data


def deny(name: str, reason: str) -> dict[str, Any]:
    """The exact deny of an event."""
    if name == "PermissionRequest":
        return {"behavior": "deny", "message": reason}
    if name == "PreToolUse":
        return {"permissionDecision": "deny", "permissionDecisionReason": reason}
    return {"decision": "block", "reason": reason}


def render(route: Route, answer: Answer) -> Output:
    """Copilot CLI's output for ``answer`` to the event ``route``."""
    name = route.name
    if answer.unavailable is not None:
        return render_unavailable(route, answer, deny)
    outcome, reason = answer.outcome, answer.reason
    guard_event = name in ("PreToolUse", "PermissionRequest")
    out: dict[str, Any] = {}
    if outcome == "halt":
        stop = reason or "stopped by a hookbus hook"
        out = deny(name, stop) if guard_event else {}
        out.update({"continue": False, "stopReason": stop})
    elif outcome == "deny" and (guard_event or name in BLOCK_FORM):
        out = deny(name, reason or "denied by a hookbus hook")
    elif guard_event:
        out = adapters.unapplied_as_deny(
            name, answer, deny, ask_reason=ASK_REASON, rewrite_reason=REWRITE_REASON
        )
    return adapters.with_context(out, name, answer, CONTEXT_FORM)


ADAPTER = Adapter(
    NAME,
    label="GitHub Copilot CLI",
    binary="copilot",
    installer="hookbus.harnesses.install.copilot",
    tried=("1.0.102",),
    fails_open=(
        "a timeout and stdout that is not JSON let the call run",
        "a project's .github/hooks are skipped silently outside a trusted folder",
    ),
    routes=ROUTES,
    tools=TOOLS,
    render=render,
    meta_keys=META_KEYS,
    settings=SETTINGS,
    normalize=normalize,
)
