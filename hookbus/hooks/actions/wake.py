"""``wake`` actions: wake the supervising agent of a managed session.

The event's payload carries a ``supervision`` dict, made by the agent's own hook process
(:mod:`hookbus.supervisor.capture`): which agent, which tmux session, which supervisor
(``openclaw_session_id``), the trigger, the state hint, the pane, the context pressure.
This action turns it into a structured message (sections ``[SESSION IDENTITY]``,
``[TRIGGER]``, ``[STATE HINT]``, ``[PANE CONTENT]``, ``[CONTEXT PRESSURE]``,
``[AVAILABLE ACTIONS]``) and delivers it to **that agent's supervisor only**:

* ``command = "openclaw agent --session-id {openclaw_session_id}"``: the command is split
  once, at registration, like a shell would (``shlex``), then each argument has the
  placeholders ``{agent_id}``, ``{openclaw_session_id}`` and ``{tmux_session_name}`` replaced.
  No shell ever sees the values, and values that could read as options (a leading ``-``) or
  hold whitespace are refused. The message goes on stdin; the process runs like a shell
  hook's (scrubbed environment, process group killed at the timeout, output capped), with
  ``HOOKBUS_AGENT_ID``, ``HOOKBUS_OPENCLAW_SESSION_ID`` and ``HOOKBUS_TMUX_SESSION`` set.
* ``url = "https://..."``: a POST of ``{"agent_id", "openclaw_session_id",
  "tmux_session_name", "trigger", "message", "supervision"}``.

An event without a ``supervision`` dict (an unmanaged session) wakes nobody.

**Async** (the default hook_mode): the harness publishes the event, the fan-out runs this
action in an RQ job, and whatever the supervisor answers is dropped. **Bidirectional**
(Stop and PreCompact of an agent whose hook_mode is ``bidirectional``): the harness sends a
blocking request with a long deadline; here the action waits for the supervisor, whose
answer ``{"decision": "block", "reason": "..."}`` (any result dialect) becomes the hook's
result, so the agent continues with the reason as its next instruction. A supervisor that
does not answer in time lets the session stop, and the result says so. While it waits, the
wake holds one chain worker thread: chain workers need more threads
(``workers.concurrency``) than bidirectional agents waiting at once, or the namespace's
guards wait behind the supervisor.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hookbus.bus.ids import AGENT_ID_ENV
from hookbus.bus.wire import HookResult
from hookbus.errors import HookExecutionError, HookRegistrationError, HookTimeout
from hookbus.hooks.actions.models import WakeAction

if TYPE_CHECKING:
    from hookbus.hooks.manifest_model import HookManifest
    from hookbus.hooks.registry import HookRegistry

logger = logging.getLogger(__name__)

#: The placeholders a wake command may use.
PLACEHOLDERS: tuple[str, ...] = ("agent_id", "openclaw_session_id", "tmux_session_name")
#: Key of the capture in the event payload (``hookbus.supervisor.capture.PAYLOAD_KEY``).
PAYLOAD_KEY = "supervision"
#: Time kept back from a bidirectional wait so the answer still beats the deadline, in s.
REPLY_MARGIN_S = 1.0

_PLACEHOLDER_RE = re.compile(r"\{([^{}]*)\}")
# what a placeholder value may be: it becomes one argument of the supervisor command
_VALUE_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@+/=-]{0,199}\Z")
_PYTHON_NAMES = frozenset({"python", "python3"})

# hookbus tmux actions that apply in each state (the message's [AVAILABLE ACTIONS])
_ACTIONS_BY_STATE: dict[str, tuple[str, ...]] = {
    "menu": ("choose <n>", "submit", "type <text>", "enter", "esc", "snapshot"),
    "permission_prompt": ("choose <n>", "enter", "esc", "snapshot"),
    "idle": ("type <text>", "clear_then <command>", "snapshot"),
    "error": ("type <text>", "clear_then <command>", "esc", "snapshot"),
    "working": ("esc", "snapshot"),
}
_ALL_ACTIONS: tuple[str, ...] = (
    "choose <n>",
    "type <text>",
    "clear_then <command>",
    "enter",
    "esc",
    "submit",
    "snapshot",
)


def available_actions(session: str, state: str, trigger: str) -> list[str]:
    """The ``hookbus tmux`` commands that apply to a session in ``state``."""
    if trigger == "session_terminated":
        return []
    actions = _ACTIONS_BY_STATE.get(state, _ALL_ACTIONS)
    return [f"hookbus tmux {session} {action}" for action in actions]


def _pressure_line(pressure: Any) -> str:
    if not isinstance(pressure, Mapping):
        return "unknown [UNKNOWN]"
    percent = pressure.get("percent")
    level = pressure.get("level") or "UNKNOWN"
    shown = f"{percent}%" if isinstance(percent, int) else "unknown"
    threshold = pressure.get("threshold")
    note = f" (warning above {threshold}%, critical above 80%)" if threshold is not None else ""
    return f"{shown} [{level}]{note}"


def build_message(kind: str, supervision: Mapping[str, Any], *, waits: bool) -> str:
    """The structured wake message (plain text, one section per header)."""
    session = str(supervision.get("tmux_session_name", ""))
    trigger = str(supervision.get("trigger") or kind)
    state = str(supervision.get("state_hint") or "working")
    pane = str(supervision.get("pane") or "")
    if not pane:
        pane = (
            "(none: the session ended)"
            if trigger == "session_terminated"
            else "(the pane was empty or could not be captured)"
        )
    actions = available_actions(session, state, trigger)
    if not actions:
        actions = ["(none: the session ended; restart it to continue)"]
    if waits:
        actions.append(
            'or answer {"decision": "block", "reason": "<next instruction>"} to continue the '
            "session with that instruction; answer nothing to let it stop"
        )
    sections = [
        (
            "SESSION IDENTITY",
            f"agent_id: {supervision.get('agent_id', '')}\ntmux_session_name: {session}",
        ),
        ("TRIGGER", trigger),
        ("STATE HINT", state),
        ("PANE CONTENT", pane),
        ("CONTEXT PRESSURE", _pressure_line(supervision.get("context_pressure"))),
        ("AVAILABLE ACTIONS", "\n".join(actions)),
    ]
    return "\n\n".join(f"[{title}]\n{body}" for title, body in sections) + "\n"


def _placeholders_of(part: str) -> list[str]:
    return _PLACEHOLDER_RE.findall(part)


def _fill(part: str, values: Mapping[str, str]) -> str:
    return _PLACEHOLDER_RE.sub(lambda m: values[m.group(1)], part)


class WakeCall:
    """A compiled wake action."""

    def __init__(
        self,
        hook_id: str,
        *,
        argv: list[str] | None,
        url: str | None,
        headers: dict[str, str],
        folder: Path,
        env_allowlist: tuple[str, ...],
        env: dict[str, str],
        max_output_bytes: int,
        registry: HookRegistry,
    ) -> None:
        self.hook_id = hook_id
        self.argv = argv
        self.url = url
        self.headers = headers
        self.folder = folder
        self.env_allowlist = env_allowlist
        self.env = env
        self.max_output_bytes = max_output_bytes
        self.registry = registry

    @classmethod
    def from_manifest(cls, manifest: HookManifest, *, registry: HookRegistry) -> WakeCall:
        hook_id = manifest.name
        spec = manifest.action.spec
        assert isinstance(spec, WakeAction)
        if manifest.batch is not None:
            raise HookRegistrationError(hook_id, "a wake hook cannot batch: each wake is one agent")
        folder = Path(manifest.folder).resolve()
        argv: list[str] | None = None
        if spec.command is not None:
            try:
                argv = (
                    shlex.split(spec.command)
                    if isinstance(spec.command, str)
                    else list(spec.command)
                )
            except ValueError as exc:
                raise HookRegistrationError(hook_id, f"cannot split command: {exc}") from None
            if not argv:
                raise HookRegistrationError(hook_id, "the wake command is empty")
            for part in argv:
                for name in _placeholders_of(part):
                    if name not in PLACEHOLDERS:
                        raise HookRegistrationError(
                            hook_id,
                            f"unknown placeholder {{{name}}} in the wake command; use "
                            + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS),
                        )
            if _placeholders_of(argv[0]):
                raise HookRegistrationError(hook_id, "the program of a wake command is fixed")
            if argv[0] in _PYTHON_NAMES:
                argv[0] = sys.executable
            elif "/" in argv[0] and not Path(argv[0]).is_absolute():
                argv[0] = str(folder / argv[0])
        return cls(
            hook_id,
            argv=argv,
            url=spec.url,
            headers=dict(spec.headers),
            folder=folder,
            env_allowlist=tuple(registry.env_allowlist),
            env=dict(spec.env),
            max_output_bytes=spec.max_output_bytes,
            registry=registry,
        )

    def describe(self) -> str:
        if self.argv is not None:
            return f"wake: {shlex.join(self.argv)}"
        return f"wake: POST {self.url}"

    # --- running ------------------------------------------------------------------

    def _identity(self, supervision: Mapping[str, Any]) -> dict[str, str]:
        """The placeholder values, checked: each one the command uses must be set, and none
        may hold spaces or start with '-' (it would read as an option)."""
        used = {name for part in self.argv or () for name in _placeholders_of(part)}
        values: dict[str, str] = {}
        for name in PLACEHOLDERS:
            value = supervision.get(name, "")
            ok = isinstance(value, str) and (
                _VALUE_RE.match(value) is not None or (value == "" and name not in used)
            )
            if not ok:
                raise HookExecutionError(
                    self.hook_id,
                    f"supervision.{name} is {value!r}: set it in the agent registry "
                    "(`hookbus agents set`); it must hold no spaces nor start with '-'",
                )
            values[name] = str(value)
        return values

    def __call__(self, arg: Any, timeout: float | None, under_deadline: bool = False) -> Any:
        if isinstance(arg, list):
            raise HookExecutionError(self.hook_id, "a wake hook takes one event, not a batch")
        payload = getattr(arg, "payload", None) or {}
        supervision = payload.get(PAYLOAD_KEY) if isinstance(payload, Mapping) else None
        if not isinstance(supervision, Mapping):
            return None  # not a managed session: nobody to wake
        values = self._identity(supervision)
        kind = str(getattr(arg, "kind", ""))
        waits = under_deadline or getattr(arg, "reply_to", None) is not None
        message = build_message(kind, supervision, waits=waits)
        wait_s = timeout
        if waits and timeout is not None:
            wait_s = max(timeout - min(REPLY_MARGIN_S, timeout * 0.05), 0.05)
        try:
            if self.argv is not None:
                raw = self._run_command(values, message, kind, wait_s, waits=waits)
            else:
                raw = self._post(values, supervision, message, wait_s)
        except HookTimeout:
            if not waits:
                raise
            notice = (
                f"hookbus: the supervisor of {values['agent_id']} "
                f"({values['openclaw_session_id']}) did not answer within {wait_s:.0f}s; "
                "the session stops"
            )
            logger.warning("%s (hook %s)", notice, self.hook_id)
            return HookResult(context=[notice], logs=[notice])
        return raw if waits else None

    def _run_command(
        self,
        values: Mapping[str, str],
        message: str,
        kind: str,
        wait_s: float | None,
        *,
        waits: bool,
    ) -> Any:
        from hookbus.hooks.actions.shell import ShellCall

        assert self.argv is not None
        argv = [self.argv[0], *(_fill(part, values) for part in self.argv[1:])]
        env = dict(self.env)
        env[AGENT_ID_ENV] = values["agent_id"]
        env["HOOKBUS_OPENCLAW_SESSION_ID"] = values["openclaw_session_id"]
        env["HOOKBUS_TMUX_SESSION"] = values["tmux_session_name"]
        shell = ShellCall(
            self.hook_id,
            argv,
            cwd=self.folder,
            folder=self.folder,
            env_allowlist=self.env_allowlist,
            env=env,
            max_output_bytes=self.max_output_bytes,
            exit_codes={},
        )
        code, out, err, out_over, err_over = shell.execute(message.encode(), wait_s, kind)
        if waits:
            return shell.interpret(code, out, err, out_over, err_over)
        if code != 0:  # async: the answer is dropped, but a failed delivery is an error
            said = err.decode("utf-8", "replace").strip()[-500:]
            raise HookExecutionError(
                self.hook_id, f"the wake command exited {code}" + (f": {said}" if said else "")
            )
        return None

    def _post(
        self,
        values: Mapping[str, str],
        supervision: Mapping[str, Any],
        message: str,
        wait_s: float | None,
    ) -> Any:
        import httpx

        body = {
            **values,
            "trigger": supervision.get("trigger"),
            "message": message,
            "supervision": dict(supervision),
        }
        headers = {"content-type": "application/json", "user-agent": "hookbus", **self.headers}
        client: httpx.Client = self.registry.http_client()
        try:
            response = client.post(
                str(self.url),
                content=json.dumps(body, ensure_ascii=False).encode(),
                headers=headers,
                timeout=wait_s,
            )
        except httpx.TimeoutException:
            raise HookTimeout(self.hook_id, f"{self.url} did not answer within {wait_s}s") from None
        except httpx.HTTPError as exc:
            raise HookExecutionError(
                self.hook_id, f"POST {self.url} failed: {type(exc).__name__}: {exc}"
            ) from None
        if not 200 <= response.status_code < 300:
            raise HookExecutionError(
                self.hook_id, f"{self.url} answered HTTP {response.status_code}"
            )
        if not response.content.strip():
            return None
        try:
            return response.json()
        except ValueError:
            raise HookExecutionError(
                self.hook_id, f"{self.url} answered a body that is not JSON"
            ) from None
