"""Cline CLI's row of the adapter table: its events, its input shape, its answer forms.

Cline (npm ``cline`` 3.0.65) has no hook settings: a hook is a *file* named after its event
(``PreToolUse``, ``TaskStart``...) in a hooks folder (``~/.cline/hooks/``, a project's
``.clinerules/hooks/``), run with its ``#!`` interpreter, the event's JSON on stdin. The input
is Cline's own shape (``hookName: "tool_call"``, ``taskId``, ``sessionContext.rootSessionId``,
``workspaceRoots``, ``tool_call: {id, name, input}``), which :func:`normalize` turns into the
common one: the event named by the file it runs as, the session its root session (a
subagent's events included), ``tool_name`` / ``tool_use_id`` / ``tool_input`` from the call.
Its shell tool, ``run_commands``, takes a *list* of command lines in one call; the bus sees
it as ``Bash`` whose ``tool_input.command`` holds them all (each in its own ``sh -c`` when
there are several, so that a quote left open in one cannot hide the next from a guard); its
``read_files`` as ``Read`` with the paths in ``file_path`` (one file) and ``file_paths``.

Only PreToolUse and PostToolUse are waited for; every other event is started detached and
its output ignored, so those are published. What a hook prints on stdout is read as JSON:

* ``overrideInput`` replaces the call's input before it runs; it is the only way to refuse
  one call and let the task go on. A denied ``run_commands`` call runs ``echo`` of the
  reason instead (its output is what the model reads), any other built-in tool gets a
  ``null`` input, which each of them rejects before doing anything; the reason also goes
  to the model as ``contextModification`` (a ``<hook_context>`` message);
* ``cancel: true`` + ``errorMessage`` stops the whole task: a halt, and the deny of a tool
  the adapter does not know (an MCP tool runs a ``null`` input as ``{}``) or of a call it
  cannot see (the installer's fallback, input it could not read);
* ``contextModification`` alone adds context.

Cline fails open on everything else: the exit code is ignored, and a crash, stdout that is
not JSON, a spawn failure or its 120 s timeout let the call run. So the adapter answers a
guard with JSON whenever it runs at all, and the hook file the installer writes prints the
fallback refusal itself when hookbus does not exit 0, with the deadline far under 120 s.
"""

from __future__ import annotations

from hookbus.harnesses.adapters import REQUEST, Adapter, Answer, Output, Route, unavailable_reason

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

NAME = "cline"

#: Cline 3.0.65's hook files, in lifecycle order, mapped onto the catalogue. Only PreToolUse
#: is waited for by a guard; the other events are telemetry (Cline does not wait for them).
ROUTES: tuple[Route, ...] = (
    Route("TaskStart", "SessionStart"),
    Route("TaskResume", "SessionStart"),
    Route("UserPromptSubmit", "PromptSubmit"),
    Route("PreToolUse", mode=REQUEST, guard=True),
    Route("PostToolUse"),
    Route("TaskComplete", "Stop"),
    Route("TaskError", "StopFailure"),
    Route("TaskCancel", "Interrupt"),
    Route("SessionShutdown", "SessionEnd"),
    Route("PreCompact", install=False),  # a file name Cline knows but never runs
)

#: Cline's ``hookName`` of each event -> the hook file (route) it runs as.
EVENTS: dict[str, str] = {
    "agent_start": "TaskStart",
    "agent_resume": "TaskResume",
    "prompt_submit": "UserPromptSubmit",
    "tool_call": "PreToolUse",
    "tool_result": "PostToolUse",
    "agent_end": "TaskComplete",
    "agent_error": "TaskError",
    "agent_abort": "TaskCancel",
    "session_shutdown": "SessionShutdown",
}

#: Cline's built-in tools -> the canonical (Claude Code) names guards are written for.
TOOLS: dict[str, str] = {
    "run_commands": "Bash",
    "read_files": "Read",
    "editor": "Edit",
    "apply_patch": "Edit",
    "search_codebase": "Grep",
    "fetch_web_content": "WebFetch",
    "ask_question": "AskUserQuestion",
    "spawn_agent": "Task",
}
#: The shell tool: refused by running ``echo`` of the reason in place of its commands.
SHELL_TOOL = "run_commands"
#: Built-in tools (3.0.65) that validate their input before doing anything, so a ``null``
#: input refuses the call (tried with the binary); any other tool is refused by ``cancel``.
NULL_REFUSED = frozenset(
    {
        *TOOLS,
        *(
            f"team_{name}"
            for name in (
                "spawn_teammate",
                "shutdown_teammate",
                "status",
                "task",
                "run_task",
                "cancel_run",
                "list_runs",
                "await_runs",
                "send_message",
                "broadcast",
                "read_mailbox",
                "mission_log",
                "cleanup",
                "create_outcome",
                "attach_outcome_fragment",
                "review_outcome_fragment",
                "finalize_outcome",
                "list_outcomes",
            )
        ),
    }
)

#: Input fields that describe the session rather than the event: they go to ``meta``.
META_KEYS = (
    "cwd",
    "hook_event_name",
    "hookName",
    "timestamp",
    "taskId",
    "sessionContext",
    "workspaceRoots",
    "workspaceInfo",
    "clineVersion",
    "userId",
    "parent_agent_id",
)

#: Hooks folders per installer scope (one file per event, hookbus's own).
SETTINGS = {"user": "~/.cline/hooks", "project": ".clinerules/hooks"}

#: What a refused shell call prints instead of running (the model reads it as the output).
REFUSED_OUTPUT = "hookbus refused this command: {reason}"
ASK_REASON = "a person must confirm this call ({reason}); hookbus refuses it meanwhile"


def _shell_words(item: object) -> str | None:
    """One entry of ``run_commands`` as the command line it runs (None: unreadable)."""
    if isinstance(item, str):
        return item
    if isinstance(item, dict) and isinstance(item.get("command"), str):
        args = item.get("args") or []
        if isinstance(args, list) and all(isinstance(a, str) for a in args):
            return " ".join([item["command"], *args])
    return None


def _commands(raw: object) -> list[object]:
    """The command entries of a ``run_commands`` input, in every shape Cline accepts (a
    string, a list, ``commands`` as a list or one string, ``command``, ``cmd``)."""
    if isinstance(raw, list):
        return list(raw)
    if isinstance(raw, dict):
        if "commands" in raw:
            found = raw["commands"]
            return list(found) if isinstance(found, list) else [found]
        if "command" in raw:
            return [raw] if "args" in raw else [raw["command"]]
        if "cmd" in raw:
            return [raw["cmd"]]
    return [raw]


def _quoted(text: str) -> str:
    """``text`` as one POSIX shell word (``shlex.quote`` without importing ``re``)."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def shell_input(raw: object) -> dict[str, Any]:
    """A ``run_commands`` input as ``Bash``'s: ``command`` holds every command line (each in
    ``sh -c`` when there are several, as Cline runs each in a shell of its own), and
    ``commands`` the list. An entry that cannot be read leaves ``command`` not a string,
    which a guard refuses rather than pass."""
    entries = _commands(raw)
    lines = [_shell_words(entry) for entry in entries]
    if not lines or any(line is None for line in lines):
        return {"command": raw, "commands": entries}
    words = [line for line in lines if line is not None]
    if len(words) == 1:
        return {"command": words[0], "commands": words}
    return {"command": "\n".join(f"sh -c {_quoted(w)}" for w in words), "commands": words}


def file_input(raw: object) -> object:
    """A ``read_files`` input with the paths it reads where guards of ``Read`` look:
    ``file_path`` when it reads one file, ``file_paths`` always (every shape Cline accepts:
    ``files`` of paths or ``{path}`` objects, ``file_paths``, ``paths``, a bare path)."""
    entries: object = raw
    if isinstance(raw, dict):
        entries = next((raw[k] for k in ("files", "file_paths", "paths") if k in raw), [raw])
    if not isinstance(entries, list):
        entries = [entries]
    paths = [e.get("path") if isinstance(e, dict) else e for e in entries]
    shaped: dict[str, Any] = dict(raw) if isinstance(raw, dict) else {"files": raw}
    shaped["file_paths"] = [p for p in paths if isinstance(p, str)]
    if len(paths) == 1 and isinstance(paths[0], str):
        shaped["file_path"] = paths[0]
    return shaped


#: Tools whose input the bus gets reshaped for the guards of their canonical tool.
SHAPES = {SHELL_TOOL: shell_input, "read_files": file_input}


def normalize(data: dict[str, Any]) -> dict[str, Any]:
    """Cline's input as the common shape (the rules in the module's docstring)."""
    hook_name = data.get("hookName")
    if "hook_event_name" not in data and isinstance(hook_name, str) and hook_name:
        data["hook_event_name"] = EVENTS.get(hook_name, hook_name)
    context = data.get("sessionContext")
    root = context.get("rootSessionId") if isinstance(context, dict) else None
    session = root if isinstance(root, str) and root else data.get("taskId")
    if "session_id" not in data and isinstance(session, str) and session:
        data["session_id"] = session
    roots = data.get("workspaceRoots")
    if "cwd" not in data and isinstance(roots, list) and roots and isinstance(roots[0], str):
        data["cwd"] = roots[0]
    data.pop("preToolUse", None)  # the same call again, every non-string value as JSON text
    data.pop("postToolUse", None)
    call = data.pop("tool_call", None)
    result = data.pop("tool_result", None)
    for found in (call, result):
        if isinstance(found, dict):
            tool = found.get("name")
            data["tool_name"] = tool
            if isinstance(found.get("id"), str):
                data["tool_use_id"] = found["id"]
            raw = found.get("input")
            shape = SHAPES.get(tool) if isinstance(tool, str) else None
            data["tool_input"] = shape(raw) if shape is not None else raw
    if isinstance(result, dict):
        data["tool_response"] = result.get("output")
        if result.get("error") is not None:
            data["tool_error"] = result["error"]
        if isinstance(result.get("durationMs"), int):
            data["duration_ms"] = result["durationMs"]
    return data


def refusal(event: Mapping[str, Any], reason: str) -> dict[str, Any]:
    """Cline's refusal of the call ``event`` describes: a shell call runs ``echo`` of the
    reason instead, another built-in tool gets a ``null`` input (rejected before it does
    anything), both with the reason as context for the model; any other call, or one not
    known, stops the task (``cancel``)."""
    tool = event.get("tool_name")
    if tool == SHELL_TOOL:
        echo = f"echo {_quoted(REFUSED_OUTPUT.format(reason=reason))}"
        return {"overrideInput": {"commands": [echo]}, "contextModification": reason}
    if isinstance(tool, str) and tool in NULL_REFUSED:
        return {"overrideInput": None, "contextModification": f"hookbus refused {tool}: {reason}"}
    return {"cancel": True, "errorMessage": reason}


def rewritten(event: Mapping[str, Any], new_input: Mapping[str, Any]) -> object:
    """A hook's rewritten ``tool_input`` as Cline's input: a ``Bash`` rewrite of a shell call
    back into ``commands``."""
    if event.get("tool_name") != SHELL_TOOL:
        return dict(new_input)
    before = event.get("tool_input")
    command = new_input.get("command")
    if isinstance(command, str) and not (
        isinstance(before, dict) and before.get("command") == command
    ):
        return {"commands": [command]}
    commands = new_input.get("commands")
    if isinstance(commands, list):
        return {"commands": commands}
    return dict(new_input)


def render(route: Route, answer: Answer) -> Output:
    """Cline's output for ``answer`` to the event ``route`` (only a guard's is read)."""
    event = answer.event
    if answer.unavailable is not None:
        note = f"hookbus: {answer.unavailable}"
        if answer.fails_closed(route):
            return Output(refusal(event, unavailable_reason(answer.unavailable)), stderr=note)
        return Output(stderr=f"{note}; {route.name} passes")
    outcome, reason = answer.outcome, answer.reason
    out: dict[str, Any] = {}
    if outcome == "halt":
        out = {"cancel": True, "errorMessage": reason or "stopped by a hookbus hook"}
    elif route.guard and outcome == "deny":
        out = refusal(event, reason or "denied by a hookbus hook")
    elif route.guard and outcome == "ask":
        out = refusal(event, ASK_REASON.format(reason=reason or "asked by a hookbus hook"))
    elif route.guard and outcome == "allow" and isinstance(answer.updated.get("tool_input"), dict):
        out = {"overrideInput": rewritten(event, answer.updated["tool_input"])}
    if answer.context and "cancel" not in out and outcome != "deny":
        context = "\n".join(answer.context)
        previous = out.get("contextModification")
        out["contextModification"] = f"{previous}\n{context}" if previous else context
    stderr = f"hookbus: {reason or 'a failure policy decided'}" if answer.degraded else ""
    return Output(out or None, stderr=stderr)


ADAPTER = Adapter(
    NAME,
    label="Cline",
    binary="cline",
    installer="hookbus.harnesses.install.cline",
    tried=("3.0.65",),
    fails_open=(
        "the exit code is ignored: a crash, stdout that is not JSON, a hook that cannot "
        "start and the 120 s timeout let the call run (the installed hook file prints its "
        "own refusal when hookbus does not exit 0)",
        "a hook file of the user's that sorts after hookbus's and prints its own "
        "overrideInput replaces hookbus's refusal (the last overrideInput wins)",
    ),
    routes=ROUTES,
    tools=TOOLS,
    render=render,
    meta_keys=META_KEYS,
    settings=SETTINGS,
    normalize=normalize,
    unnamed="PreToolUse",
)
