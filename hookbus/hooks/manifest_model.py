"""The hook manifest model: one pydantic model whatever file form a hook came
from, and the error messages that name the file, the field *as the author spelled it* and
the reason, e.g. ``hooks/guard/HOOK.toml: action.shell.timeout_secs: must be > 0``.

pydantic is used here only: manifests are written by people and deserve good messages. The
registry compiles a manifest into plain objects once, so nothing here runs per event.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from hookbus import defaults
from hookbus.bus.kinds import DEFAULT_CATALOGUE, Catalogue
from hookbus.errors import ManifestError, UnknownEventKind
from hookbus.hooks.actions.kinds import ACTION_KINDS, ActionSpec
from hookbus.hooks.actions.raw import rules_only_action
from hookbus.hooks.spec_models import (
    MAX_LIST,
    ApprovalSpec,
    BatchSpec,
    MatchSpec,
    ModifySpec,
    RequiresSpec,
    RetrySpec,
    StrictModel,
    one_or_many,
)
from hookbus.hooks.state_models import EscalateSpec, LimitSpec, LockSpec

TOML_FILENAME = "HOOK.toml"
MARKDOWN_FILENAME = "HOOK.md"
YAML_SUFFIXES = (".yaml", ".yml")
#: The author of every hook nobody says otherwise about.
OPERATOR = "operator"
#: How an agent author starts: ``agent:<id>``.
AGENT_PREFIX = "agent:"
_AUTHOR_RE = re.compile(r"(?:operator(?::[\w.@:-]{1,119})?|agent:[\w.@:-]{1,122})\Z")
#: An agent id in a ``scope`` list, or ``*`` (every agent).
SCOPE_RE = re.compile(r"(?:\*|[\w.@:-]{1,122})\Z")
#: The most agent ids a ``scope`` may name.
MAX_SCOPE = 64

ManifestForm = Literal["toml", "markdown", "yaml"]
OnError = Literal["allow", "deny"]
HookMode = Literal["enforce", "shadow"]
ExitOutcome = Literal["continue", "allow", "deny", "ask", "halt", "error"]

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")


class HookManifest(StrictModel):
    """One hook, whatever file form it came from.

    ``events`` hold canonical kind names (aliases are resolved on load). ``source_path`` is
    the manifest file and ``folder`` the hook's folder (the YAML file's parent for the
    single-file form): actions run relative to it.
    """

    name: str
    description: str = ""
    version: str = "0.1.0"
    events: list[str] = Field(max_length=MAX_LIST)
    priority: int = Field(default=defaults.DEFAULT_PRIORITY, ge=-1_000_000, le=1_000_000)
    enabled: bool = True
    blocking: bool | None = None
    #: With ``blocking = false``: also run inside the chain of a blocking request, as an
    #: advisory hook (its time counts against the agent's deadline, no retries, skipped once
    #: a guard stops the chain). Without it a ``blocking = false`` hook observes requests
    #: off the critical path: an RQ job per answered request, the decision in
    #: ``meta["decision"]``.
    inline: bool = False
    on_error: OnError = "allow"
    match: MatchSpec = Field(default_factory=MatchSpec)
    action: ActionSpec
    modify: ModifySpec = Field(default_factory=ModifySpec)
    requires: RequiresSpec = Field(default_factory=RequiresSpec)
    effects: list[Any] = Field(default_factory=list, max_length=MAX_LIST)
    skip_security_audit: bool = False
    #: A guard the fleet must never run without: ``reload --allow-partial`` never drops it.
    guard: bool = False
    #: ``shadow``: run on live blocking requests and record what it would have decided on the
    #: decision (``Decision.shadow``) without changing the answer; trial a guard before
    #: enforcing it. ``enforce`` (the default): a hook of the chain.
    mode: HookMode = "enforce"
    #: Who wrote the hook: ``operator`` (or ``operator:<name>``) or ``agent:<id>``. Agents
    #: write through ``hook_write``, which sets it; a hand-written manifest is an operator's.
    author: str = OPERATOR
    #: Agent ids (or ``*``) an agent-written hook also acts on besides its author's own
    #: events: set by the operator when approving, never by the agent's write.
    scope: list[str] = Field(default_factory=list, max_length=MAX_SCOPE)
    exit_codes: dict[int, ExitOutcome] = Field(default_factory=dict, max_length=MAX_LIST)
    retries: RetrySpec = Field(default_factory=RetrySpec)
    batch: BatchSpec | None = None
    #: fleet-wide rules, shared by every worker and agent (see docs/fleet-state.md)
    limit: LimitSpec | None = None
    lock: LockSpec | None = None
    escalate: EscalateSpec | None = None
    #: Who answers this hook's ``ask``: the agent's user (default) or an operator.
    approval: ApprovalSpec | None = None
    source_path: Path = Path(TOML_FILENAME)
    folder: Path = Path()
    form: ManifestForm = "toml"

    @model_validator(mode="before")
    @classmethod
    def _singular_event(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "event" in data and "events" not in data:
            data = dict(data)
            data["events"] = data.pop("event")
        if (
            isinstance(data, Mapping)
            and "action" not in data
            and any(data.get(rule) is not None for rule in ("limit", "lock", "escalate"))
        ):
            # a hook that is only its fleet-wide rules needs no action
            data = dict(data)
            data["action"] = rules_only_action()
        return data

    @field_validator("name")
    @classmethod
    def _name_form(cls, value: str) -> str:
        if not _NAME_RE.match(value):
            raise ValueError(
                "must be 1-64 letters, digits, '-', '_' or '.', starting with a letter or digit"
            )
        return value

    @field_validator("author")
    @classmethod
    def _author_form(cls, value: str) -> str:
        if not _AUTHOR_RE.match(value):
            raise ValueError(
                "must be 'operator', 'operator:<name>' or 'agent:<id>' (letters, digits and "
                "'._@:-', at most 128 characters)"
            )
        return value

    @field_validator("scope")
    @classmethod
    def _scope_form(cls, value: list[str]) -> list[str]:
        for item in value:
            if not SCOPE_RE.match(item):
                raise ValueError(f"scope entries are agent ids or '*', got {item!r}")
        return value

    @property
    def agent_authored(self) -> bool:
        """Written by an agent (``author = "agent:<id>"``): held to the agent rules."""
        return self.author.startswith(AGENT_PREFIX)

    @field_validator("priority", mode="before")
    @classmethod
    def _priority_int(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("must be an integer (lower runs first; default 100)")
        return value

    @field_validator("events", mode="before")
    @classmethod
    def _events_canonical(cls, value: Any, info: ValidationInfo) -> Any:
        value = one_or_many(value)
        if not isinstance(value, list) or not value:
            raise ValueError('give at least one event kind (e.g. events = ["PreToolUse"])')
        catalogue = _catalogue(info)
        out: list[str] = []
        for item in value:
            if not isinstance(item, str):
                raise ValueError(f"event kinds are strings, got {item!r}")
            try:
                kind = catalogue.canonical(item)
            except UnknownEventKind as exc:
                raise ValueError(f"unknown event kind {item!r}") from exc
            if kind not in out:
                out.append(kind)
        return out

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> HookManifest:
        catalogue = _catalogue(info)
        if self.blocking:
            cannot = [k for k in self.events if not catalogue.resolve(k).may_block]
            if cannot:
                raise ValueError(
                    f"blocking: {', '.join(cannot)} can never block; set blocking = false "
                    "or drop those events"
                )
        self._check_rules(catalogue)
        if self.inline and self.blocking is not False:
            raise ValueError(
                "inline: only a blocking = false hook runs inline as an advisory hook; set "
                "blocking = false or drop inline"
            )
        if self.mode == "shadow":
            never = [k for k in self.events if not catalogue.resolve(k).may_block]
            if never:
                raise ValueError(
                    f"mode: a shadow hook runs only on blocking requests and {', '.join(never)} "
                    'can never block; drop those events or use mode = "enforce"'
                )
        return self

    def _check_rules(self, catalogue: Catalogue) -> None:
        stateful = self.limit is not None or self.lock is not None
        if stateful and self.batch is not None:
            raise ValueError("limit / lock: a batching hook cannot have them (drop [batch])")
        kind = self.action.kind
        if ACTION_KINDS[kind].rules_only and not (stateful or self.escalate is not None):
            raise ValueError(
                f"action: [action.{kind}] is for hooks with [limit], [lock] or [escalate]"
            )
        if self.lock is not None:
            released = []
            for item in self.lock.release_on:
                try:
                    released.append(catalogue.canonical(item))
                except UnknownEventKind as exc:
                    raise ValueError(f"lock.release_on: unknown event kind {item!r}") from exc
            object.__setattr__(self.lock, "release_on", released)

    @property
    def release_kinds(self) -> list[str]:
        """Kinds the hook runs on only to release its lock (not in ``events``)."""
        if self.lock is None:
            return []
        return [k for k in self.lock.release_on if k not in self.events]

    @property
    def timeout_s(self) -> float:
        """The action's timeout in seconds: its ``timeout_secs``, else its kind's default."""
        timeout = getattr(self.action.spec, "timeout_secs", None)
        if timeout is not None:
            return float(timeout)
        return ACTION_KINDS[self.action.kind].default_timeout_s

    @property
    def action_kind(self) -> str:
        """The name of the action's kind (a key of the action-kind table)."""
        return self.action.kind


def _catalogue(info: ValidationInfo) -> Catalogue:
    context = info.context
    if isinstance(context, Mapping):
        found = context.get("catalogue")
        if isinstance(found, Catalogue):
            return found
    return DEFAULT_CATALOGUE


# --- error messages ---------------------------------------------------------------------


def _num(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _reason(error: Mapping[str, Any]) -> str:
    """pydantic's message, rewritten in the house style ("must be > 0")."""
    kind = error.get("type", "")
    ctx = error.get("ctx") or {}
    if kind == "greater_than":
        return f"must be > {_num(ctx.get('gt'))}"
    if kind == "greater_than_equal":
        return f"must be >= {_num(ctx.get('ge'))}"
    if kind == "less_than_equal":
        return f"must be <= {_num(ctx.get('le'))}"
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "unknown field (check the spelling; see docs/hooks.md for the fields)"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "must be an integer"
    if kind in ("float_type", "float_parsing"):
        return "must be a number"
    if kind in ("bool_type", "bool_parsing"):
        return "must be true or false"
    if kind == "string_type":
        return "must be a string"
    if kind in ("list_type",):
        return "must be a list"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return "must be a table"
    message = str(error.get("msg", "invalid"))
    if kind == "value_error" and message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    return message


def _dotted(loc: tuple[Any, ...]) -> str | None:
    parts = [str(p) for p in loc if not (isinstance(p, str) and p.startswith(("function-", "str")))]
    return ".".join(parts) or None


#: Field names of the alternate forms, so errors name what the author wrote.
_MARKDOWN_FIELDS = {
    "action.shell.command": "command",
    "action.shell.timeout_secs": "timeout",
}
_YAML_FIELDS = {
    "name": "id",
    "events": "event_type",
    "description": "summary",
    "action.shell.command": "handler.command",
    "action.shell.timeout_secs": "handler.timeout",
    "action.python.entrypoint": "handler.entrypoint",
    "action.http.url": "handler.url",
}


def _first_error(exc: ValidationError, form: ManifestForm) -> tuple[str | None, str]:
    errors = exc.errors(include_url=False)
    error = errors[0]
    field = _dotted(tuple(error.get("loc", ())))
    renames = _MARKDOWN_FIELDS if form == "markdown" else _YAML_FIELDS if form == "yaml" else {}
    if field is not None:
        for ours, theirs in renames.items():
            if field == ours or field.startswith(ours + "."):
                field = theirs + field[len(ours) :]
                break
    reason = _reason(error)
    if len(errors) > 1:
        reason += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return field, reason


def manifest_from_data(
    data: Mapping[str, Any],
    *,
    path: Path,
    folder: Path,
    form: ManifestForm = "toml",
    catalogue: Catalogue = DEFAULT_CATALOGUE,
) -> HookManifest:
    """Validate already-parsed data (in the TOML form's field names) into a manifest."""
    payload = dict(data)
    payload["source_path"] = path
    payload["folder"] = folder
    payload["form"] = form
    try:
        return HookManifest.model_validate(payload, context={"catalogue": catalogue})
    except ValidationError as exc:
        field, reason = _first_error(exc, form)
        raise ManifestError(str(path), field, reason) from None
