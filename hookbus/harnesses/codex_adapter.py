"""Codex CLI's row of the adapter table: its events, its output forms, its config.

Codex (0.169) runs command hooks declared in ``config.toml`` (``[[hooks.PreToolUse]]``...)
through the shell, with JSON on stdin (``session_id``, ``turn_id``, ``transcript_path``,
``cwd``, ``hook_event_name``, ``model``, ``permission_mode`` and the event's own fields;
its shell tool arrives as ``tool_name: "Bash"`` with ``tool_input.command``, file edits as
``apply_patch``), and reads exit 0 + JSON on stdout, validated strictly. The forms hookbus
answers with, all exit 0:

* PreToolUse deny: ``hookSpecificOutput`` with exactly ``hookEventName``,
  ``permissionDecision: "deny"`` and ``permissionDecisionReason`` (the reason reaches the
  model). Codex runs the tool when a deny has an unknown extra field or no reason, and it
  does not support ``ask`` (it runs the call): a fleet's *ask*, and a rewritten input it
  cannot apply, go out as a deny that says why;
* PermissionRequest deny: ``hookSpecificOutput.decision`` ``{"behavior": "deny",
  "message": ...}`` (``updatedInput`` there makes Codex fail, so a rewrite is no answer:
  the normal approval path decides);
* UserPromptSubmit, Stop, SubagentStop: ``{"decision": "block", "reason": ...}`` (Stop:
  the reason is the agent's next instruction);
* halt on other events: ``{"continue": false, "stopReason": ...}``;
* added context on SessionStart and UserPromptSubmit: ``hookSpecificOutput.additionalContext``
  (plain stdout there *becomes* model context, so nothing but the JSON answer is printed);
* a degraded decision: ``systemMessage``.

What fails open in Codex, and what hookbus does: exit 2 with JSON on stdout, any exit but
0 and 2, and a timeout let the tool run, so the adapter only answers exit 0 + JSON with a
deadline under the entry's timeout, and the installer appends ``|| printf <deny JSON>`` to
the guards' commands so that a hookbus that cannot start still denies. Codex also skips an
untrusted hook silently: the installer records each entry's trust the way ``/hooks`` does
(:mod:`hookbus.harnesses.install.codex`).
"""

from __future__ import annotations

from hookbus.harnesses import adapters
from hookbus.harnesses.adapters import REQUEST, Adapter, Answer, Output, Route, render_unavailable

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    from typing import Any

NAME = "codex"

#: Every hook event of Codex 0.169, in lifecycle order, mapped onto the catalogue.
ROUTES: tuple[Route, ...] = (
    Route("SessionStart", mode=REQUEST),
    Route("UserPromptSubmit", "PromptSubmit", mode=REQUEST),
    Route("PreModelRequest"),
    Route("PostModelRequest"),
    Route("PreToolUse", mode=REQUEST, guard=True),
    Route("PermissionRequest", mode=REQUEST, guard=True),
    Route("PostToolUse"),
    Route("PreCompact"),
    Route("PostCompact"),
    Route("SubagentStart"),
    Route("SubagentStop", mode=REQUEST),
    Route("Stop", mode=REQUEST),
    Route("Interrupt"),
    Route("SessionEnd"),
)

#: Codex's tool names -> the canonical ones (its shell tool already arrives as ``Bash``).
TOOLS: dict[str, str] = {"apply_patch": "Edit"}

#: Input fields that describe the session rather than the event: they go to ``meta``.
META_KEYS = ("transcript_path", "cwd", "permission_mode", "hook_event_name", "model", "turn_id")

#: config.toml per installer scope (a project's layer loads only in a trusted project).
SETTINGS = {"user": "~/.codex/config.toml", "project": ".codex/config.toml"}

#: Events whose ``decision: "block"`` + ``reason`` blocks (Stop: continues the agent).
BLOCK_FORM = frozenset({"UserPromptSubmit", "Stop", "SubagentStop"})
#: Events whose ``hookSpecificOutput.additionalContext`` Codex reads.
CONTEXT_FORM = frozenset({"SessionStart", "UserPromptSubmit"})
ASK_REASON = "a person must confirm this call ({reason}); hookbus refuses it meanwhile"
REWRITE_REASON = (
    "a hookbus hook rewrote this call, which Codex cannot apply; run this input instead: {input}"
)


def deny(name: str, reason: str) -> dict[str, Any]:
    """The exact deny of a guard event (no field Codex does not know)."""
    if name == "PermissionRequest":
        return {
            "hookSpecificOutput": {
                "hookEventName": name,
                "decision": {"behavior": "deny", "message": reason},
            }
        }
    if name == "PreToolUse":
        return {
            "hookSpecificOutput": {
                "hookEventName": name,
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
    return {"decision": "block", "reason": reason}


def render(route: Route, answer: Answer) -> Output:
    """Codex's output for ``answer`` to the event ``route``."""
    name = route.name
    if answer.unavailable is not None:
        return render_unavailable(route, answer, deny)
    outcome, reason = answer.outcome, answer.reason
    guard_event = name in ("PreToolUse", "PermissionRequest")
    out: dict[str, Any] = {}
    if outcome == "halt":
        stop = reason or "stopped by a hookbus hook"
        out = deny(name, stop) if guard_event else {"continue": False, "stopReason": stop}
    elif outcome == "deny" and (guard_event or name in BLOCK_FORM):
        out = deny(name, reason or "denied by a hookbus hook")
    elif name == "PreToolUse":
        out = adapters.unapplied_as_deny(
            name, answer, deny, ask_reason=ASK_REASON, rewrite_reason=REWRITE_REASON
        )
    return adapters.with_context(out, name, answer, CONTEXT_FORM)


ADAPTER = Adapter(
    NAME,
    label="Codex",
    binary="codex",
    installer="hookbus.harnesses.install.codex",
    tried=("0.169.0",),
    fails_open=(
        "any exit but 0 and 2, exit 2 with JSON on stdout, a timeout, stdout that is not "
        "JSON (the installer's shell fallback denies when hookbus does not exit 0)",
        "a deny with an unknown extra field or no reason, and ask",
        "an untrusted or changed hook is skipped silently",
    ),
    routes=ROUTES,
    tools=TOOLS,
    render=render,
    meta_keys=META_KEYS,
    settings=SETTINGS,
)
