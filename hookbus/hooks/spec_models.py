"""The parts of a hook manifest other than its action: conditions (``match``), payload keys a
hook may change (``modify``), requirements, retries and batching. pydantic models, frozen and
strict about unknown fields, validated once when a manifest is read.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hookbus import defaults
from hookbus.hooks.conditions import linear_regex_error

#: The most entries any list or table of a manifest may hold (a manifest is read on every
#: worker at every reload: its size is bounded, whoever wrote it).
MAX_LIST = 256


class StrictModel(BaseModel):
    """Frozen and strict about unknown fields, so a typo is an error and not a no-op."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def one_or_many(value: Any) -> Any:
    """Accept one string where a list of strings is expected (``tools = "Bash"``)."""
    if isinstance(value, str):
        return [value]
    return value


class MatchSpec(StrictModel):
    """Conditions selecting the events a hook runs on; every given condition must hold.

    Globs (``*``, ``?``, ``[...]``; ``*`` also crosses ``/``) are matched case-sensitively.
    ``pattern`` is a regular expression searched in the payload field ``field`` (a dotted
    path such as ``tool_input.command``; the whole payload as JSON when no field is named).
    ``tool_input`` matches fields of the tool's input by dotted path: a string is a glob, a
    number or boolean must be equal, or one of ``{equals = ...}``, ``{glob = "..."}``,
    ``{regex = "..."}``. ``tools_except`` selects calls of every tool it does *not* name
    (a tool allowlist, with an action that denies).
    """

    agents: list[str] = Field(default_factory=list, max_length=MAX_LIST)
    sessions: list[str] = Field(default_factory=list, max_length=MAX_LIST)
    channels: list[str] = Field(default_factory=list, max_length=MAX_LIST)
    users: list[str] = Field(default_factory=list, max_length=MAX_LIST)
    tools: list[str] = Field(default_factory=list, max_length=MAX_LIST)
    ability_scope: list[str] = Field(default_factory=list, max_length=MAX_LIST)
    callers: list[Literal["ai_session", "background_job", "ci_pipeline", "manual_cli"]] = Field(
        default_factory=list
    )
    pattern: str | None = None
    field: str | None = None
    min_duration_ms: int | None = Field(default=None, ge=0)
    only_if_changed_paths: list[str] = Field(default_factory=list, max_length=MAX_LIST)
    tool_input: dict[str, Any] = Field(default_factory=dict, max_length=MAX_LIST)
    tools_except: list[str] = Field(default_factory=list, max_length=MAX_LIST)

    @field_validator(
        "agents",
        "sessions",
        "channels",
        "users",
        "tools",
        "ability_scope",
        "callers",
        "only_if_changed_paths",
        "tools_except",
        mode="before",
    )
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return one_or_many(value)

    @field_validator("tool_input")
    @classmethod
    def _tool_input_tests(cls, value: dict[str, Any]) -> dict[str, Any]:
        for path, test in value.items():
            if not path or any(not part for part in path.split(".")):
                raise ValueError(f"{path!r}: use a dotted path such as 'command' or 'a.b'")
            if isinstance(test, dict):
                if len(test) != 1 or next(iter(test)) not in ("equals", "glob", "regex"):
                    raise ValueError(f"{path}: give exactly one of equals, glob or regex")
                kind, target = next(iter(test.items()))
                if kind != "equals" and not isinstance(target, str):
                    raise ValueError(f"{path}: {kind} must be a string")
                if kind == "regex" and (error := linear_regex_error(target)) is not None:
                    raise ValueError(f"{path}: {error}")
            elif not isinstance(test, str | int | float | bool):
                raise ValueError(f"{path}: a glob string, a number, a boolean or a table")
        return value

    @field_validator("pattern")
    @classmethod
    def _pattern_compiles(cls, value: str | None) -> str | None:
        if value is not None and (error := linear_regex_error(value)) is not None:
            raise ValueError(error)
        return value

    def is_empty(self) -> bool:
        return self == _EMPTY_MATCH

    def summary(self) -> str:
        """One short line for ``hookbus hooks list`` (its ``match_summary``)."""
        parts: list[str] = []
        tools = [*self.tools, *self.ability_scope]
        for label, values in (
            ("tool", tools),
            ("agent", self.agents),
            ("session", self.sessions),
            ("channel", self.channels),
            ("user", self.users),
            ("caller", self.callers),
            ("paths", self.only_if_changed_paths),
        ):
            if values:
                parts.append(f"{label}={','.join(values)}")
        if self.pattern is not None:
            parts.append(f"{self.field or 'payload'}~/{self.pattern}/")
        if self.min_duration_ms is not None:
            parts.append(f"duration>={self.min_duration_ms}ms")
        for path, test in self.tool_input.items():
            parts.append(f"tool_input.{path}={test}")
        if self.tools_except:
            parts.append(f"tool!={','.join(self.tools_except)}")
        return " ".join(parts) or "all events"


_EMPTY_MATCH = MatchSpec()


class ModifySpec(StrictModel):
    """Which payload keys a hook may change. ``tool_input.command`` names a nested key; a
    bare ``command`` that is not a modifiable top-level key means that key inside each
    modifiable top-level key (so ``command`` allows ``tool_input.command`` on PreToolUse)."""

    allow_keys: list[str] = Field(default_factory=list, max_length=MAX_LIST)

    @field_validator("allow_keys", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return one_or_many(value)


class RequiresSpec(StrictModel):
    """What must hold for the hook to load: OS names (``linux``, ``darwin``, ``windows``),
    binaries on PATH, environment variables set."""

    os: list[str] = Field(default_factory=list, max_length=MAX_LIST)
    bins: list[str] = Field(default_factory=list, max_length=MAX_LIST)
    env: list[str] = Field(default_factory=list, max_length=MAX_LIST)

    @field_validator("os", "bins", "env", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return one_or_many(value)


class RetrySpec(StrictModel):
    """How often the bus retries a failed non-blocking run before dead-lettering it."""

    count: int = Field(default=0, ge=0, le=100)
    intervals_s: list[int] = Field(default_factory=list, max_length=MAX_LIST)

    @field_validator("intervals_s")
    @classmethod
    def _non_negative(cls, value: list[int]) -> list[int]:
        if any(v < 0 for v in value):
            raise ValueError("intervals must be >= 0 seconds")
        return value


class BatchSpec(StrictModel):
    """Run a non-blocking hook on batches of events instead of one job per event."""

    max_events: int = Field(default=100, gt=0)
    max_wait_ms: int = Field(default=1000, gt=0)


#: Most operators an approval may require.
MAX_APPROVERS = 5


class ApprovalSpec(StrictModel):
    """``[approval]``: who answers when this hook says ``ask``.

    ``route = "agent"`` hands the question to the agent's own user as always;
    ``"operator"`` parks the request in the namespace's approval inbox until an operator
    decides or ``wait_s`` passes (then the event's failure policy answers, degraded). A
    field left out takes the fleet's ``approvals.route`` / ``approvals.wait_s``.
    ``approvers``: how many different operators must allow it (like a deployment's required
    reviewers; one deny denies); ``operators``: who may answer it at all;
    ``forbid_requester``: the operator whose name is the asking agent's id (the same NAME in
    the gateway's and the console's tokens files) may not answer it.
    """

    route: Literal["agent", "operator"] | None = None
    wait_s: int | None = Field(default=None, ge=1, le=defaults.MAX_APPROVAL_WAIT_S)
    #: how many different operators must allow (a deny by any one of them denies)
    approvers: int = Field(default=1, ge=1, le=MAX_APPROVERS)
    #: who may answer (operator names, ``ann`` or ``operator:ann``); empty: any operator
    operators: list[str] = Field(default_factory=list, max_length=MAX_LIST)
    #: the fleet's notifiers (``[notifiers.NAME]``) told of each parked request
    notify: list[str] = Field(default_factory=list, max_length=MAX_LIST)
    #: the asking agent's own operator identity (``operator:<agent id>``) may not answer
    forbid_requester: bool = False

    @field_validator("operators")
    @classmethod
    def _operator_names(cls, value: list[str]) -> list[str]:
        names = [v if v.startswith("operator:") else f"operator:{v}" for v in value]
        if any(not n.removeprefix("operator:") or any(c.isspace() for c in n) for n in names):
            raise ValueError("operator names are words without spaces")
        return names

    @model_validator(mode="after")
    def _enough_operators(self) -> ApprovalSpec:
        if self.operators and len(set(self.operators)) < self.approvers:
            raise ValueError(
                f"approvers = {self.approvers} needs at least that many names in operators"
            )
        return self
