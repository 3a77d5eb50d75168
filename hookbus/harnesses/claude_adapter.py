"""Claude Code's row of the adapter table: its events, its output forms, its settings.

Claude Code (2.1.295 and later) runs a command hook per event with JSON on stdin
(``session_id``, ``transcript_path``, ``cwd``, ``permission_mode``, ``hook_event_name`` and
the event's own fields) and reads exit 0 + optional JSON on stdout. Everything hookbus
answers goes out as that JSON with exit 0, never as exit 2 + stderr: the JSON form works on
every event (PermissionRequest ignores exit 2) and carries the reason word for word to the
model. The forms, per event:

* PreToolUse and PreSkillShellCommand (2.1.332: a skill's own shell command, guarded as a
  Bash PreToolUse; a rewritten command is never run, so a rewrite answers deny):
  ``hookSpecificOutput.permissionDecision`` ``deny`` / ``ask`` (+
  ``permissionDecisionReason``); ``allow`` only with a rewritten ``updatedInput`` (a chain
  with no objection is *no opinion*: it must not skip Claude Code's own permission prompt);
  ``additionalContext``.
* PermissionRequest: ``hookSpecificOutput.decision.behavior`` ``deny`` (+ ``message``) or
  ``allow`` with ``updatedInput``; no output leaves the dialog to the user.
* UserPromptSubmit, Stop, SubagentStop, PreCompact, PreModelSwitch: ``decision: "block"`` +
  ``reason``; UserPromptSubmit / SessionStart also ``additionalContext``.
* halt, on any event: ``continue: false`` + ``stopReason``.
* a degraded decision (a policy decided, not the hooks): ``systemMessage`` for the user.

Guards (PreToolUse, PreSkillShellCommand, PermissionRequest, PreModelSwitch) fail closed:
when the bus cannot answer, they deny with a reason saying hookbus is unavailable.
Installers must pair them with ``"onFailure": "block"`` so that a hook that cannot even start
also blocks.
"""

from __future__ import annotations

from hookbus.harnesses.adapters import REQUEST, Adapter, Answer, Output, Route, render_unavailable

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    from typing import Any

NAME = "claude-code"

#: Every event name of Claude Code's current hooks reference (2.1.328's binary knows 33,
#: 2.1.332 adds PreSkillShellCommand), in lifecycle order. Anything else passes under its
#: own name, observe-only.
ROUTES: tuple[Route, ...] = (
    Route("Setup"),
    Route("SessionStart", mode=REQUEST),
    Route("InstructionsLoaded"),
    Route("UserPromptSubmit", "PromptSubmit", mode=REQUEST),
    Route("UserPromptExpansion"),
    Route("PreModelSwitch", mode=REQUEST, guard=True),
    Route("PostModelSwitch"),
    Route("PreToolUse", mode=REQUEST, guard=True),
    Route("PermissionRequest", mode=REQUEST, guard=True),
    # a skill's own shell command, run outside the tool loop: guarded as a Bash call
    Route("PreSkillShellCommand", "PreToolUse", mode=REQUEST, guard=True, since="2.1.332"),
    Route("PermissionDenied"),
    Route("PostToolUse"),
    Route("PostToolUseFailure"),
    Route("PostToolBatch"),
    Route("Notification"),
    Route("MessageDisplay", install=False),
    Route("Elicitation"),
    Route("ElicitationResult"),
    Route("SubagentStart"),
    Route("SubagentStop", mode=REQUEST),
    Route("TaskCreated"),
    Route("TaskCompleted"),
    Route("TeammateIdle"),
    Route("Stop", mode=REQUEST),
    Route("StopFailure"),
    Route("PreCompact", mode=REQUEST),
    Route("PostCompact"),
    Route("ConfigChange"),
    Route("CwdChanged"),
    Route("DirectoryAdded"),
    Route("FileChanged"),
    # a WorktreeCreate hook *replaces* git's worktree creation and must print a path
    Route("WorktreeCreate", install=False),
    Route("WorktreeRemove"),
    Route("SessionEnd"),
)

#: Claude Code's tool names are the canonical vocabulary; only aliases need a row.
TOOLS: dict[str, str] = {"MultiEdit": "Edit"}

#: Input fields that describe the session rather than the event: they go to ``meta``.
META_KEYS = ("transcript_path", "cwd", "permission_mode", "hook_event_name")

#: Settings files per installer scope (``~`` and the project folder expanded by the
#: installer); the format is Claude Code's ``settings.json`` ``hooks`` table.
SETTINGS = {
    "user": "~/.claude/settings.json",
    "project": ".claude/settings.json",
    "local": ".claude/settings.local.json",
}

#: Events whose ``decision: "block"`` + ``reason`` blocks (or, for Stop, makes the agent
#: continue with the reason as its next instruction).
BLOCK_FORM = frozenset({"UserPromptSubmit", "Stop", "SubagentStop", "PreCompact", "PreModelSwitch"})
#: Events answered by ``hookSpecificOutput.permissionDecision`` (+ its reason).
PERMISSION_FORM = frozenset({"PreToolUse", "PreSkillShellCommand"})
#: Events whose ``hookSpecificOutput.additionalContext`` Claude Code reads.
CONTEXT_FORM = frozenset({"PreToolUse", "UserPromptSubmit", "SessionStart"})


def render(route: Route, answer: Answer) -> Output:
    """Claude Code's output for ``answer`` to the event ``route``."""
    name = route.name
    if answer.unavailable is not None:
        return render_unavailable(route, answer, _deny)
    out = _stopping(name, answer.outcome, answer.reason)
    specific = _specific(name, answer)
    if answer.context and name in CONTEXT_FORM and answer.outcome != "halt":
        specific["additionalContext"] = "\n".join(answer.context)
    if specific:
        existing = out.setdefault("hookSpecificOutput", {"hookEventName": name})
        existing.update(specific)
    if answer.degraded:
        out["systemMessage"] = f"hookbus: {answer.reason or 'a failure policy decided'}"
    return Output(out or None)


def _stopping(name: str, outcome: str, reason: str | None) -> dict[str, Any]:
    """The top-level fields of a halt or a deny (empty for the other outcomes)."""
    out: dict[str, Any] = {}
    if outcome == "halt":
        out["continue"] = False
        out["stopReason"] = reason or "stopped by a hookbus hook"
        if name in PERMISSION_FORM or name == "PermissionRequest":
            out.update(_deny(name, out["stopReason"], interrupt=True))
    elif outcome == "deny":
        if name in PERMISSION_FORM or name == "PermissionRequest":
            out.update(_deny(name, reason or "denied by a hookbus hook"))
        elif name in BLOCK_FORM:
            out["decision"] = "block"
            out["reason"] = reason or "blocked by a hookbus hook"
    return out


def _specific(name: str, answer: Answer) -> dict[str, Any]:
    """``hookSpecificOutput`` fields of an ask, a rewritten input or an operator's allow."""
    reason = answer.reason
    if answer.outcome == "ask" and name in PERMISSION_FORM:
        return {
            "permissionDecision": "ask",
            **({"permissionDecisionReason": reason} if reason else {}),
        }
    if answer.outcome != "allow":
        return {}
    new_input = answer.updated.get("tool_input")
    if isinstance(new_input, dict) and name == "PreSkillShellCommand":
        # Claude Code never runs a rewritten skill command: say so rather than let the
        # original run as if the hook had not changed it
        return {
            "permissionDecision": "deny",
            "permissionDecisionReason": "a hookbus hook rewrote this command, and a skill's "
            "shell command cannot be rewritten, so it was not run",
        }
    if isinstance(new_input, dict) and name == "PreToolUse":
        return {
            "permissionDecision": "allow",
            "permissionDecisionReason": reason or "input rewritten by a hookbus hook",
            "updatedInput": new_input,
        }
    if isinstance(new_input, dict) and name == "PermissionRequest":
        return {"decision": {"behavior": "allow", "updatedInput": new_input}}
    if answer.operator_allowed and name in PERMISSION_FORM:
        return {
            "permissionDecision": "allow",
            "permissionDecisionReason": reason or "allowed by an operator",
        }
    if answer.operator_allowed and name == "PermissionRequest":
        return {"decision": {"behavior": "allow"}}
    return {}


def _deny(name: str, reason: str, *, interrupt: bool = False) -> dict[str, Any]:
    """Claude Code's deny of the event ``name`` (a halt's also interrupts the agent)."""
    if name == "PermissionRequest":
        decision: dict[str, Any] = {"behavior": "deny", "message": reason}
        if interrupt:
            decision["interrupt"] = True
        body: dict[str, Any] = {"hookSpecificOutput": {"hookEventName": name, "decision": decision}}
    elif name in PERMISSION_FORM:
        body = {
            "hookSpecificOutput": {
                "hookEventName": name,
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
    else:
        body = {"decision": "block", "reason": reason}
    return body


ADAPTER = Adapter(
    NAME,
    label="Claude Code",
    binary="claude",
    installer="hookbus.harnesses.install.claude_code",
    tried=("2.1.331", "2.1.332"),
    on_failure_since="2.1.295",
    fails_open=(
        "stdout that is not JSON lets the call run, even with onFailure: block",
        "exit 2 on PermissionRequest is ignored (the dialog is left to the user)",
        "without onFailure: block, exit 1, a timeout, an http 500 or a refused connection",
    ),
    routes=ROUTES,
    tools=TOOLS,
    render=render,
    meta_keys=META_KEYS,
    settings=SETTINGS,
)
