"""OpenCode's row of the adapter table, and the implementation Kilo CLI's row shares.

OpenCode (1.18.33) and its fork Kilo CLI (7.7.7) have no command hooks: guards are
in-process JavaScript plugins (``{plugin,plugins}/*.js`` in a config folder), each an async
function returning hooks ``(input, output) => void`` that change behaviour by *mutating*
``output`` or by *throwing*. hookbus's installer writes one small plugin
(:mod:`hookbus.harnesses.install.opencode`) that sends ``{"hook", "input", "output"}`` as JSON
to ``hookbus <cli> hook`` on stdin (or to the gateway) for every hook point below and applies
the answer. :func:`normalize` turns that into the common shape (``hook_event_name``,
``session_id``, ``tool_name``, ``tool_input``...); the route names are the CLI's own hook
names, and its bus events by their ``type`` (``session.idle``...).

The answers hookbus prints (JSON, exit 0), which the plugin applies:

* ``{"block": reason}`` on ``tool.execute.before``: the plugin throws ``Error(reason)``; the
  call does not run, the model gets the reason as the tool's result and the session goes on
  (a fleet's *ask*, which nobody can answer in a plugin, is a block saying a person must
  confirm); on ``chat.message`` the throw refuses the prompt;
* ``{"args": {...}}``: a rewritten tool input, assigned over ``output.args``;
* ``{"context": text}``: added context, which the plugin appends to the session's system
  prompt (``experimental.chat.system.transform``) from then on;
* ``{"systemMessage": text}``: a note the plugin logs (a degraded decision, a bus that could
  not answer a non-guard event).

What fails open in OpenCode and Kilo: a plugin that fails to load (a syntax error, a bad
import) is skipped without a word; ``run --pure`` (``OPENCODE_PURE``) loads no plugin at all;
and a hook has no timeout (one that never settles stalls the call), so the plugin bounds its
own wait and blocks a guarded call when the wait runs out, as when hookbus cannot start or
answers nothing it can read. ``permission.ask`` is in the plugin types but is never called by
1.18.33: a permission request arrives only as the ``permission.asked`` bus event, which is
sent as a notification the plugin cannot answer.
"""

from __future__ import annotations

from hookbus.harnesses.adapters import REQUEST, Adapter, Answer, Output, Route, render_unavailable

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

NAME = "opencode"
#: The hook point whose throw blocks one tool call: the guard.
TOOL_BEFORE = "tool.execute.before"
#: The plugin hook that carries every bus event; its events are routed by their ``type``.
EVENT_HOOK = "event"

#: The route names that are plugin hooks; every other route is a bus event's ``type``.
PLUGIN_HOOKS = frozenset(
    {"chat.message", TOOL_BEFORE, "tool.execute.after", "experimental.session.compacting"}
)

#: The hook points of OpenCode 1.18.33 (and Kilo 7.7.7) that map onto the catalogue, in
#: lifecycle order: plugin hooks by their name, bus events by their ``type``.
ROUTES: tuple[Route, ...] = (
    Route("session.created", "SessionStart"),
    Route("chat.message", "PromptSubmit", mode=REQUEST),
    Route(TOOL_BEFORE, "PreToolUse", mode=REQUEST, guard=True),
    Route("permission.asked", "PermissionRequest"),
    Route("tool.execute.after", "PostToolUse"),
    Route("experimental.session.compacting", "PreCompact"),
    Route("session.compacted", "PostCompact"),
    Route("session.error", "StopFailure"),
    Route("session.idle", "Stop"),
    Route("session.deleted", "SessionEnd"),
)

#: The tools of OpenCode and Kilo -> the canonical (Claude Code) names guards are written for.
TOOLS: dict[str, str] = {
    "bash": "Bash",
    "edit": "Edit",
    "write": "Write",
    "read": "Read",
    "glob": "Glob",
    "grep": "Grep",
    "list": "LS",
    "webfetch": "WebFetch",
    "todowrite": "TodoWrite",
    "task": "Task",
    "skill": "Skill",
}

#: Input fields that describe the session rather than the event: they go to ``meta``.
META_KEYS = ("hook_event_name", "hook", "cwd")

#: Plugin files per installer scope (user: ``$XDG_CONFIG_HOME/opencode``).
SETTINGS = {
    "user": "~/.config/opencode/plugin/hookbus.js",
    "project": ".opencode/plugin/hookbus.js",
}

ASK_REASON = "a person must confirm this call ({reason}); hookbus refuses it meanwhile"
#: What a plugin's fail-open modes are, for ``hookbus doctor`` (both CLIs).
FAILS_OPEN = (
    "a plugin that fails to load is skipped without a word (the installer checks that "
    "hookbus's loads)",
    "`run --pure` loads no plugin at all",
    "a hook has no timeout: the plugin bounds its own wait and blocks when it runs out",
)
#: OpenCode's camelCase path argument and the field guards read on every CLI.
_PATH_ARG, _PATH_FIELD = "filePath", "file_path"


def _tool_input(args: Any) -> Any:
    """The tool's arguments as guards read them: ``filePath`` also as ``file_path``."""
    if isinstance(args, dict) and isinstance(args.get(_PATH_ARG), str):
        return {**args, _PATH_FIELD: args.get(_PATH_FIELD, args[_PATH_ARG])}
    return args


def _event_fields(event: Mapping[str, Any]) -> dict[str, Any]:
    """The common fields of one bus event (``{id, type, properties}``)."""
    props = event.get("properties")
    props = props if isinstance(props, dict) else {}
    info = props.get("info")
    session = props.get("sessionID")
    if not isinstance(session, str) and isinstance(info, dict):
        session = info.get("id")
    data: dict[str, Any] = {"hook_event_name": event.get("type"), "event_id": event.get("id")}
    if isinstance(session, str):
        data["session_id"] = session
    if event.get("type") == "permission.asked":
        permission = props.get("permission")
        tool = props.get("tool")
        data["tool_name"] = permission
        data["tool_input"] = dict(props.get("metadata") or {})
        data["patterns"] = props.get("patterns")
        data["permission_id"] = props.get("id")
        if isinstance(tool, dict):
            data["tool_use_id"] = tool.get("callID")
    elif event.get("type") == "session.error":
        data["error"] = props.get("error")
    elif isinstance(info, dict):
        data["cwd"] = info.get("directory")
        data["title"] = info.get("title")
    return data


def normalize(data: dict[str, Any]) -> dict[str, Any]:
    """The plugin's ``{"hook", "input", "output"}`` as the common shape; input that already
    names its event (``hook_event_name``) passes as it is, and a field of the common shape
    given beside the three (``agent_id``, ``session_id``...) is kept over the derived one."""
    hook = data.get("hook")
    if "hook_event_name" in data or not isinstance(hook, str):
        return data
    given = {k: v for k, v in data.items() if k not in ("hook", "input", "output")}
    return {**_derived(hook, data), **given}


def _derived(hook: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """The common fields of the plugin's input for ``hook``."""
    raw_input = data.get("input")
    given: dict[str, Any] = raw_input if isinstance(raw_input, dict) else {}
    raw_output = data.get("output")
    out: dict[str, Any] = raw_output if isinstance(raw_output, dict) else {}
    if hook == EVENT_HOOK:
        event = given.get("event")
        found = _event_fields(event if isinstance(event, dict) else {})
        return {"hook": hook, **found}
    found = {"hook": hook, "hook_event_name": hook}
    if isinstance(given.get("sessionID"), str):
        found["session_id"] = given["sessionID"]
    if hook in (TOOL_BEFORE, "tool.execute.after"):
        found["tool_name"] = given.get("tool")
        found["tool_use_id"] = given.get("callID")
        args = out.get("args") if hook == TOOL_BEFORE else given.get("args")
        found["tool_input"] = _tool_input(args if isinstance(args, dict) else {})
        if hook != TOOL_BEFORE:
            found["tool_response"] = {k: out.get(k) for k in ("title", "output", "metadata")}
    elif hook == "chat.message":
        parts = out.get("parts")
        texts = [
            p["text"]
            for p in parts or []
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        ]
        found["prompt"] = "\n".join(texts)
        message = out.get("message")
        if isinstance(message, dict):
            found["agent"] = message.get("agent")
            found["model"] = message.get("model")
    return found


def deny(name: str, reason: str) -> dict[str, Any]:
    """The plugin's block: it throws ``Error(reason)`` in the hook."""
    return {"block": reason}


def _args(new_input: Mapping[str, Any]) -> dict[str, Any]:
    """A rewritten ``tool_input`` as the tool's own arguments: the ``file_path`` that
    :func:`normalize` added goes back to ``filePath``."""
    args = dict(new_input)
    if _PATH_ARG in args and _PATH_FIELD in args:
        args[_PATH_ARG] = args.pop(_PATH_FIELD)
    return args


def render(route: Route, answer: Answer) -> Output:
    """The answer the plugin applies for ``answer`` to the hook point ``route``."""
    name = route.name
    if answer.unavailable is not None:
        return render_unavailable(route, answer, deny)
    outcome, reason = answer.outcome, answer.reason
    out: dict[str, Any] = {}
    if outcome == "halt" and name in (TOOL_BEFORE, "chat.message"):
        out = deny(name, reason or "stopped by a hookbus hook")
    elif outcome == "deny" and name in (TOOL_BEFORE, "chat.message"):
        out = deny(name, reason or "denied by a hookbus hook")
    elif outcome == "ask" and name == TOOL_BEFORE:
        out = deny(name, ASK_REASON.format(reason=reason or "asked by a hookbus hook"))
    elif outcome == "allow" and name == TOOL_BEFORE:
        new_input = answer.updated.get("tool_input")
        if isinstance(new_input, dict):
            out["args"] = _args(new_input)
    if answer.context and route.mode == REQUEST and "block" not in out:
        out["context"] = "\n".join(answer.context)
    if answer.degraded:
        out["systemMessage"] = f"hookbus: {answer.reason or 'a failure policy decided'}"
    return Output(out or None)


def row(name: str, *, label: str, binary: str, tried: str, settings: Mapping[str, str]) -> Adapter:
    """The adapter row of OpenCode or a fork of it (``name`` is the ``hookbus <name>``
    group, ``binary`` the executable, ``settings`` its plugin files per scope)."""
    return Adapter(
        name,
        label=label,
        binary=binary,
        installer=f"hookbus.harnesses.install.{name}",
        tried=(tried,),
        fails_open=FAILS_OPEN,
        routes=ROUTES,
        tools=TOOLS,
        render=render,
        meta_keys=META_KEYS,
        settings=settings,
        normalize=normalize,
    )


ADAPTER = row(NAME, label="OpenCode", binary="opencode", tried="1.18.33", settings=SETTINGS)
