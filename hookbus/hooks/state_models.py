"""The fleet-wide rules a manifest may declare: ``[limit]``, ``[lock]`` and ``[escalate]``.

pydantic models, validated once when a manifest is read; the templates and durations they
hold are checked here (:mod:`hookbus.state.templates`) so a typo is reported with the file
and field, not discovered on the first event. What they do at run time is
:mod:`hookbus.state.rules`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from hookbus.hooks.spec_models import StrictModel, one_or_many
from hookbus.state.templates import check_template, parse_duration

RuleOutcome = Literal["deny", "ask", "halt"]
#: Largest ``max`` of a limit and ``after`` of an escalation.
MAX_RULE_COUNT = 1_000_000
#: Most kinds a lock may name in ``release_on``.
MAX_RELEASE_KINDS = 16


def _duration(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a duration such as '30s', '15m' or '1h'")
    parse_duration(value)
    return value


class LimitSpec(StrictModel):
    """At most ``max`` matching requests per ``per`` (a sliding window) for each ``key``."""

    key: str
    max: int = Field(ge=1, le=MAX_RULE_COUNT)
    per: str
    outcome: RuleOutcome = "deny"

    @field_validator("key")
    @classmethod
    def _key_template(cls, value: str) -> str:
        return check_template(value)

    @field_validator("per")
    @classmethod
    def _per_duration(cls, value: Any) -> str:
        return _duration(value)

    @property
    def window_ms(self) -> int:
        return parse_duration(self.per)


class LockSpec(StrictModel):
    """One session at a time holds ``key``; the holder's next ``release_on`` event (or the
    ``ttl``) releases it; others get ``outcome`` meanwhile, naming the holder."""

    key: str
    ttl: str
    release_on: list[str] = Field(default_factory=list, max_length=MAX_RELEASE_KINDS)
    outcome: RuleOutcome = "deny"

    @field_validator("key")
    @classmethod
    def _key_template(cls, value: str) -> str:
        return check_template(value)

    @field_validator("ttl")
    @classmethod
    def _ttl_duration(cls, value: Any) -> str:
        return _duration(value)

    @field_validator("release_on", mode="before")
    @classmethod
    def _release_list(cls, value: Any) -> Any:
        return one_or_many(value)

    @property
    def ttl_ms(self) -> int:
        return parse_duration(self.ttl)


class EscalateSpec(StrictModel):
    """After ``after`` answers of ``of`` within ``within`` for one session (or agent), the
    next such answer becomes ``then``."""

    after: int = Field(ge=1, le=MAX_RULE_COUNT)
    within: str
    of: Literal["deny", "ask"] = "deny"
    per: Literal["session", "agent"] = "session"
    then: Literal["halt", "deny"] = "halt"

    @field_validator("within")
    @classmethod
    def _within_duration(cls, value: Any) -> str:
        return _duration(value)

    @property
    def within_ms(self) -> int:
        return parse_duration(self.within)
