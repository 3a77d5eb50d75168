"""The adapter table: one entry per agent CLI, so a new CLI is a row, not a special case.

Each entry (a module defining ``ADAPTER``, listed in :data:`ADAPTER_MODULES`) says, for one
agent CLI:

* **events**: every hook event name the CLI sends, the catalogue kind it becomes
  (:mod:`hookbus.bus.kinds`), whether the adapter waits for a decision (``request``) or
  publishes and returns at once (``publish``), whether it is a *guard* (fails closed: when
  the bus cannot answer, the call is denied), and whether the installer registers it;
* **tools**: the CLI's tool names mapped to the canonical ones, so a guard written once
  against ``Bash`` / ``Edit`` / ``Write`` matches on every CLI;
* **render**: the CLI's exact output for an answer (its JSON fields, its exit code);
* **settings**: where its installer writes, per scope, and **installer**: the module that
  writes there (:mod:`hookbus.harnesses.install.table` says what it provides);
* **normalize**: for a CLI that sends some events in a shape of its own, the function that
  turns them into the common one (``hook_event_name``, ``session_id``, ``tool_name``...).

Everything per CLI is generated from the rows: ``hookbus <cli> hook`` (:func:`hook_entry`,
dispatched before typer loads), the ``hookbus <cli>`` command group with its ``install`` and
``uninstall`` (:mod:`hookbus.cli.agents.groups`), the gateway's ``/v1/hooks/<cli>`` and
``hookbus doctor``. Adding a CLI is a row module, its installer and its fixtures.

An event name the table does not know passes under its own name, observe-only: a newer CLI
version must never turn into errors. The table is pure data and cheap to import: it is on
the per-event path of :mod:`hookbus.harnesses.lean.hook`, which must not import the catalogue
module (importing ``dataclasses`` alone is a large share of the start-up,
docs/performance.md); a unit test checks the table against the catalogue instead.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

#: The adapters: CLI name -> module defining ``ADAPTER``. Imported only when asked for.
ADAPTER_MODULES: Mapping[str, str] = {
    "claude-code": "hookbus.harnesses.claude_adapter",
    "gemini-cli": "hookbus.harnesses.gemini_adapter",
    "codex": "hookbus.harnesses.codex_adapter",
    "copilot": "hookbus.harnesses.copilot_adapter",
    "qwen-code": "hookbus.harnesses.qwen_adapter",
    "cline": "hookbus.harnesses.cline_adapter",
    "opencode": "hookbus.harnesses.opencode_adapter",
    "kilo": "hookbus.harnesses.kilo_adapter",
}

REQUEST = "request"
PUBLISH = "publish"


class Route:
    """How one CLI event travels: its catalogue kind, request or publish, guard or not."""

    __slots__ = ("guard", "install", "kind", "mode", "name", "since")

    def __init__(
        self,
        name: str,
        kind: str | None = None,
        *,
        mode: str = PUBLISH,
        guard: bool = False,
        install: bool = True,
        since: str | None = None,
    ) -> None:
        if mode not in (REQUEST, PUBLISH):
            raise ValueError(f"route {name}: mode must be {REQUEST!r} or {PUBLISH!r}")
        if guard and mode != REQUEST:
            raise ValueError(f"route {name}: a guard must be a request")
        self.name = name
        self.kind = kind or name
        self.mode = mode
        self.guard = guard
        self.install = install
        #: the CLI version that first sends this event: installed by default only into
        #: that version or a newer one (an older CLI may refuse a settings file naming it)
        self.since = since

    def __repr__(self) -> str:
        return (
            f"Route({self.name!r} -> {self.kind!r}, {self.mode}{', guard' if self.guard else ''})"
        )


class Answer:
    """What the bus said about one event, in the adapter's terms, for ``render``.

    ``decision`` is the decoded Decision (plain dict) or None; ``unavailable`` is set when
    the bus could not answer (Redis down, no worker, no reply in time, bad config) and
    says why in words a user can act on; ``policy`` is then the failure policy applied.
    ``event`` is the CLI's input (normalized) where it is known, for a CLI whose answer
    depends on the call (Cline refuses a shell call and an MCP call in different forms).
    """

    __slots__ = ("decision", "event", "policy", "unavailable")

    def __init__(
        self,
        decision: Mapping[str, Any] | None = None,
        *,
        unavailable: str | None = None,
        policy: str | None = None,
        event: Mapping[str, Any] | None = None,
    ) -> None:
        self.decision: Mapping[str, Any] = decision or {}
        self.unavailable = unavailable
        self.policy = policy
        self.event: Mapping[str, Any] = event or {}

    def fails_closed(self, route: Route) -> bool:
        """Whether an unavailable bus denies ``route``: a guard route unless its policy is
        ``allow``, and any request whose policy is ``deny`` (a kind the current bundle
        guards, or configured so)."""
        if self.unavailable is None:
            return False
        if route.guard:
            return self.policy != "allow"
        return route.mode == REQUEST and self.policy == "deny"

    @property
    def outcome(self) -> str:
        outcome = self.decision.get("outcome", "allow")
        return outcome if isinstance(outcome, str) else "allow"

    @property
    def reason(self) -> str:
        reason = self.decision.get("reason")
        return reason if isinstance(reason, str) else ""

    @property
    def degraded(self) -> bool:
        return bool(self.decision.get("degraded"))

    @property
    def context(self) -> list[str]:
        context = self.decision.get("context")
        if not isinstance(context, list):
            return []
        return [c for c in context if isinstance(c, str) and c]

    @property
    def updated(self) -> Mapping[str, Any]:
        updated = self.decision.get("updated")
        return updated if isinstance(updated, dict) else {}

    @property
    def operator_allowed(self) -> bool:
        """An operator allowed a parked request: the CLI should go ahead without asking
        its own user again."""
        approval = self.decision.get("approval")
        return isinstance(approval, dict) and approval.get("state") == "allowed"


class Output:
    """What the adapter process does: JSON on stdout (or nothing), stderr text, exit code."""

    __slots__ = ("exit_code", "stderr", "stdout")

    def __init__(
        self, stdout: Mapping[str, Any] | None = None, *, stderr: str = "", exit_code: int = 0
    ) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.exit_code = exit_code

    def __repr__(self) -> str:
        return f"Output({self.stdout!r}, stderr={self.stderr!r}, exit_code={self.exit_code})"


def unavailable_reason(detail: str) -> str:
    """The reason a fail-closed event is denied with when the bus could not answer
    (``detail`` says why); every CLI's adapter and installer fallback words it so."""
    return f"hookbus is unavailable ({detail}); blocked because this hook fails closed"


#: What stands in an agent's answer for the fleet's Redis address.
WITHHELD = "[address withheld]"
#: Where a failure's text names the fleet's Redis: a URL (its user included), redis-py's
#: "connecting to HOST:PORT.", a socket address tuple, an IP literal with or without a port.
_ADDRESS_PATTERNS = (
    (r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s;,)'\"]+?(?=:?(?:[\s;,)'\"]|$))", WITHHELD),
    (r"connecting to \S+?(?=\.?(?:\s|$))", f"connecting to {WITHHELD}"),
    (r"\('[^']*', \d+(?:, \d+, \d+)?\)", f"({WITHHELD})"),
    (r"\[[0-9A-Fa-f:.]+\](?::\d+)?", WITHHELD),
    (r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b", WITHHELD),
)


def agent_safe(text: str) -> str:
    """``text`` without the fleet's Redis address (host, port, user), for an agent that
    holds only a gateway token: it reads why the fleet did not answer, never where the
    fleet's Redis is or which user the gateway has there. (The per-event hook names it: its
    process was given the URL.)"""
    import re

    for pattern, replacement in _ADDRESS_PATTERNS:
        text = re.sub(pattern, replacement, text)
    return text


def render_unavailable(
    route: Route, answer: Answer, deny: Callable[[str, str], dict[str, Any]]
) -> Output:
    """The output of every CLI when the bus could not answer: a fail-closed event gets the
    CLI's deny (``deny(event_name, reason)``, its own JSON form) with the cause in
    ``systemMessage``; any other event passes, saying so on stderr, and for a request (an
    answer was expected) in ``systemMessage`` too, where the user sees it."""
    if answer.fails_closed(route):
        body = deny(route.name, unavailable_reason(str(answer.unavailable)))
        body["systemMessage"] = f"hookbus: {answer.unavailable}"
        return Output(body)
    note = f"hookbus: {answer.unavailable}; {route.name} passes"
    if route.mode == REQUEST:
        return Output({"systemMessage": note}, stderr=note)
    return Output(stderr=note)


def unapplied_as_deny(
    name: str,
    answer: Answer,
    deny: Callable[[str, str], dict[str, Any]],
    *,
    ask_reason: str,
    rewrite_reason: str,
) -> dict[str, Any]:
    """For a CLI that can neither ask a person nor apply a rewritten input: an *ask* as the
    CLI's deny saying a person must confirm (``ask_reason``), an allow with a rewritten
    ``tool_input`` as a deny giving the input to run instead (``rewrite_reason``); empty for
    any other answer."""
    if answer.outcome == "ask":
        return deny(name, ask_reason.format(reason=answer.reason or "asked by a hookbus hook"))
    new_input = answer.updated.get("tool_input")
    if answer.outcome == "allow" and isinstance(new_input, dict):
        from hookbus.bus import lean_json

        return deny(name, rewrite_reason.format(input=lean_json.dumps(new_input)))
    return {}


def with_context(
    out: dict[str, Any], name: str, answer: Answer, context_form: frozenset[str]
) -> Output:
    """``out`` with what every answer may add: its context as
    ``hookSpecificOutput.additionalContext`` on the events of ``context_form`` (unless it
    halts or denies), and a degraded decision's ``systemMessage``."""
    if answer.context and name in context_form and answer.outcome not in ("halt", "deny"):
        out["hookSpecificOutput"] = {
            "hookEventName": name,
            "additionalContext": "\n".join(answer.context),
        }
    if answer.degraded:
        out["systemMessage"] = f"hookbus: {answer.reason or 'a failure policy decided'}"
    return Output(out or None)


class Adapter:
    """One row of the table. ``render(route, answer)`` gives the CLI's output.

    ``label`` is the CLI's name for people; ``binary`` the executable ``hookbus doctor``
    looks for on PATH; ``installer`` the module of its installer (every row's hook finds the
    configuration as any entry point does, the user's ``~/.config/hookbus/hookbus.toml``
    included, for CLIs that strip a hook's environment); ``normalize`` turns a CLI-specific
    input shape into the common one.
    ``tried`` lists the versions the binary tests drove, ``fails_open`` what still lets a call
    through in them (``hookbus doctor`` shows both), ``on_failure_since`` the first version
    whose hook entries take ``onFailure: "block"`` (None: the CLI has none, and the
    installer's shell fallback denies instead). ``unnamed`` is the event that input naming
    none is refused as, for a CLI that reads no generic ``decision: block`` (Cline).
    """

    __slots__ = (
        "binary",
        "fails_open",
        "installer",
        "label",
        "meta_keys",
        "name",
        "normalize",
        "on_failure_since",
        "render",
        "routes",
        "settings",
        "tools",
        "tried",
        "unnamed",
    )

    def __init__(
        self,
        name: str,
        *,
        label: str,
        binary: str,
        routes: tuple[Route, ...],
        tools: Mapping[str, str],
        render: Callable[[Route, Answer], Output],
        meta_keys: tuple[str, ...],
        settings: Mapping[str, str],
        installer: str,
        normalize: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        tried: tuple[str, ...] = (),
        fails_open: tuple[str, ...] = (),
        on_failure_since: str | None = None,
        unnamed: str | None = None,
    ) -> None:
        self.name = name
        self.label = label
        self.binary = binary
        self.routes = {route.name: route for route in routes}
        self.tools = tools
        self.render = render
        self.meta_keys = meta_keys
        self.settings = settings
        self.installer = installer
        self.normalize = normalize
        self.tried = tried
        self.fails_open = fails_open
        self.on_failure_since = on_failure_since
        self.unnamed = unnamed

    def route(self, event_name: str) -> Route:
        """The route of ``event_name``; an unknown name passes as itself, observe-only."""
        found = self.routes.get(event_name)
        return found if found is not None else Route(event_name, install=False)

    def canonical_tool(self, tool_name: str) -> str:
        return self.tools.get(tool_name, tool_name)


def names() -> list[str]:
    """Every CLI of the table, in its order."""
    return list(ADAPTER_MODULES)


def adapter(name: str) -> Adapter:
    """The adapter of CLI ``name`` (``claude-code``...); KeyError names the known ones."""
    module_name = ADAPTER_MODULES.get(name)
    if module_name is None:
        raise KeyError(f"no adapter for {name!r}; known: {', '.join(sorted(ADAPTER_MODULES))}")
    __import__(module_name)  # not importlib: one import less per hook process
    found: Adapter = sys.modules[module_name].ADAPTER
    return found


def hook_entry(cli: str, args: list[str], options: dict[str, Any]) -> int | None:
    """``hookbus [globals] <cli> hook ...`` for any row, from the CLI's pre-dispatch (before
    typer loads); ``None`` hands ``--help`` to the typer app."""
    from hookbus.harnesses.lean.hook import lean_command

    return lean_command(cli, args, options)
