"""Qwen Code's row of the adapter table: its events, its output forms, its settings.

Qwen Code (0.24.4) keeps hooks in ``settings.json`` in Claude Code's shape (``"hooks":
{"<Event>": [{"matcher": ..., "hooks": [{"type": "command", "command": ..., "timeout":
<ms>}]}]}``: the timeout in *milliseconds*), and sends Claude Code's input (``session_id``,
``transcript_path``, ``cwd``, ``hook_event_name``, ``permission_mode`` and the event's own
fields); its tools have names of their own (``run_shell_command``, ``read_file``...), mapped
onto the canonical ones. It reads Claude Code's answers: ``hookSpecificOutput.
permissionDecision`` on PreToolUse (the reason reaches the model word for word),
``hookSpecificOutput.decision.behavior`` on PermissionRequest, ``decision: "block"`` +
``reason``, ``continue: false``, ``additionalContext``; so :func:`render` is Claude Code's,
except that a fleet's *ask* goes out as a deny that says a person must confirm (a headless
``--yolo`` run has nobody to ask).

What fails open in Qwen Code: exit 1 and any exit but 0 and 2, a timeout, stdout that is
not JSON, an HTTP error. So the adapter only answers exit 0 + JSON with a deadline under the
entry's timeout, and the installer ends the guards' commands with ``|| printf '<deny
JSON>'`` so that a hookbus that cannot start still denies (Qwen Code has no ``onFailure``).
"""

from __future__ import annotations

from hookbus.harnesses import claude_adapter
from hookbus.harnesses.adapters import REQUEST, Adapter, Answer, Output, Route

NAME = "qwen-code"

#: The hook events of Qwen Code 0.24.4, in lifecycle order, mapped onto the catalogue.
ROUTES: tuple[Route, ...] = (
    Route("SessionStart", mode=REQUEST),
    Route("InstructionsLoaded"),
    Route("UserPromptSubmit", "PromptSubmit", mode=REQUEST),
    Route("UserPromptExpansion"),
    Route("PreToolUse", mode=REQUEST, guard=True),
    Route("PermissionRequest", mode=REQUEST, guard=True),
    Route("PermissionDenied"),
    Route("PostToolUse"),
    Route("PostToolUseFailure"),
    Route("PostToolBatch"),
    Route("Notification"),
    Route("MessageDisplay", install=False),
    Route("TodoCreated", "TaskCreated"),
    Route("TodoCompleted", "TaskCompleted"),
    Route("SubagentStart"),
    Route("SubagentStop", mode=REQUEST),
    Route("Stop", mode=REQUEST),
    Route("StopFailure"),
    Route("PreCompact", mode=REQUEST),
    Route("PostCompact"),
    Route("SessionEnd"),
)

#: Qwen Code's built-in tools -> the canonical (Claude Code) names guards are written for.
TOOLS: dict[str, str] = {
    "run_shell_command": "Bash",
    "edit": "Edit",
    "write_file": "Write",
    "read_file": "Read",
    "read_many_files": "Read",
    "glob": "Glob",
    "grep_search": "Grep",
    "list_directory": "LS",
    "web_fetch": "WebFetch",
    "web_search": "WebSearch",
    "todo_write": "TodoWrite",
    "notebook_edit": "NotebookEdit",
    "agent": "Task",
}

#: Input fields that describe the session rather than the event: they go to ``meta``.
META_KEYS = (
    "transcript_path",
    "cwd",
    "permission_mode",
    "hook_event_name",
    "timestamp",
    "prompt_id",
)

#: Settings files per installer scope: Qwen Code's ``settings.json`` ``hooks`` table.
SETTINGS = {"user": "~/.qwen/settings.json", "project": ".qwen/settings.json"}

ASK_REASON = "a person must confirm this call ({reason}); hookbus refuses it meanwhile"


def render(route: Route, answer: Answer) -> Output:
    """Qwen Code's output for ``answer`` to the event ``route``: Claude Code's forms, an
    *ask* on a tool call sent as a deny."""
    if answer.unavailable is None and answer.outcome == "ask" and route.guard:
        reason = ASK_REASON.format(reason=answer.reason or "asked by a hookbus hook")
        answer = Answer(dict(answer.decision, outcome="deny", reason=reason))
    return claude_adapter.render(route, answer)


ADAPTER = Adapter(
    NAME,
    label="Qwen Code",
    binary="qwen",
    installer="hookbus.harnesses.install.qwen_code",
    tried=("0.24.4",),
    fails_open=(
        "exit 1 and any exit but 0 and 2, a timeout, stdout that is not JSON, an HTTP error "
        "(the installer's shell fallback denies when hookbus does not exit 0)",
    ),
    routes=ROUTES,
    tools=TOOLS,
    render=render,
    meta_keys=META_KEYS,
    settings=SETTINGS,
)
