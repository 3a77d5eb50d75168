"""The event catalogue: the one table of every event kind hookbus knows.

Each kind says whether it is blocking by default, whether a producer may send it as a
blocking request, and what a hook may change in it. Names are matched case-insensitively
and without ``_`` / ``-``, so ``before_tool_call``, ``BeforeToolCall`` and ``PreAbilityCall``
all resolve to ``PreToolUse``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hookbus.bus.settings.table import normalise
from hookbus.errors import UnknownEventKind


@dataclass(frozen=True, slots=True)
class KindSpec:
    """One row of the catalogue.

    ``verdicts`` are the stopping outcomes a hook may return (``deny``, ``ask``, ``halt``);
    ``modifiable`` the top-level payload keys a hook may change (further narrowed per hook
    by its manifest's ``modify.allow_keys``); ``context`` / ``signals`` whether added
    context and signals are kept. Observe-only kinds allow none of these.
    """

    kind: str
    blocking: bool
    may_block: bool
    verdicts: frozenset[str] = frozenset()
    modifiable: frozenset[str] = frozenset()
    context: bool = False
    signals: bool = False
    aliases: tuple[str, ...] = ()
    description: str = ""
    custom: bool = False

    @property
    def observe_only(self) -> bool:
        return not (self.verdicts or self.modifiable or self.context or self.signals)


def _spec(
    kind: str,
    *,
    blocking: bool,
    may_block: bool,
    verdicts: Iterable[str] = (),
    modifiable: Iterable[str] = (),
    context: bool = False,
    signals: bool = False,
    aliases: Iterable[str] = (),
    description: str = "",
) -> KindSpec:
    return KindSpec(
        kind=kind,
        blocking=blocking,
        may_block=may_block,
        verdicts=frozenset(verdicts),
        modifiable=frozenset(modifiable),
        context=context,
        signals=signals,
        aliases=tuple(aliases),
        description=description,
    )


#: The canonical kinds every agent CLI's events map onto, in lifecycle order.
CANONICAL_KINDS: tuple[KindSpec, ...] = (
    _spec(
        "SessionStart",
        blocking=False,
        may_block=True,
        context=True,
        aliases=("on_session_start",),
        description="a session started; hooks may add context",
    ),
    _spec(
        "PromptSubmit",
        blocking=True,
        may_block=True,
        verdicts=("deny", "halt"),
        modifiable=("prompt",),
        context=True,
        signals=True,
        aliases=("UserPromptSubmit", "before_prompt_build"),
        description="a prompt was submitted; deny/halt, add context, routing signals, "
        "append to or redact the prompt",
    ),
    _spec(
        "BeforeLLMCall",
        blocking=True,
        may_block=True,
        verdicts=("deny", "halt"),
        modifiable=("messages", "system", "metadata"),
        context=True,
        aliases=("before_llm_call",),
        description="before a model call; deny/halt, a guardrail hint, redact listed keys",
    ),
    _spec(
        "LLMOutput",
        blocking=False,
        may_block=False,
        aliases=("on_llm_output", "ModelOutput"),
        description="a model answered; observe only",
    ),
    _spec(
        "PreToolUse",
        blocking=True,
        may_block=True,
        verdicts=("deny", "ask", "halt"),
        modifiable=("tool_input",),
        context=True,
        signals=True,
        aliases=("PreAbilityCall", "BeforeToolCall", "before_tool_call"),
        description="before a tool call; allow/deny/ask/halt, ability_guard signals, "
        "rewrite allow-listed tool_input keys",
    ),
    _spec(
        "PostToolUse",
        blocking=False,
        may_block=True,
        verdicts=("deny",),
        modifiable=("tool_response",),
        context=True,
        aliases=("PostAbilityCall", "AfterToolCall", "on_after_tool_call"),
        description="after a tool call; redact tool_response fields when sent as blocking",
    ),
    _spec(
        "Notification",
        blocking=False,
        may_block=False,
        description="a notification (idle_prompt, permission_prompt...); observe only",
    ),
    _spec(
        "Stop",
        blocking=False,
        may_block=True,
        verdicts=("deny",),
        context=True,
        aliases=("response_complete",),
        description="the agent is about to stop; block with a reason and it continues",
    ),
    _spec(
        "SubagentStop",
        blocking=False,
        may_block=True,
        verdicts=("deny",),
        context=True,
        description="a subagent is about to stop; block with a reason and it continues",
    ),
    _spec(
        "PreCompact",
        blocking=False,
        may_block=True,
        verdicts=("deny",),
        context=True,
        aliases=("pre_compact",),
        description="before context compaction; block with instructions",
    ),
    _spec(
        "PermissionRequest",
        blocking=True,
        may_block=True,
        # ask: the CLI's own permission prompt, or an operator when the hook routes there
        verdicts=("deny", "ask"),
        modifiable=("tool_input",),
        description="a permission prompt is about to show; allow/deny, rewrite allowed input",
    ),
    _spec(
        "PreModelSwitch",
        blocking=False,
        may_block=True,
        verdicts=("deny", "halt"),
        context=True,
        description="the session is about to switch models (Claude Code); block with a reason",
    ),
    _spec(
        "SessionEnd",
        blocking=False,
        may_block=False,
        aliases=("SessionStop", "on_session_end", "session_terminated"),
        description="a session ended; observe only",
    ),
)

#: Claude Code hook event names not in the table above; each is accepted under its own
#: name as a non-blocking, observe-only kind.
CLAUDE_CODE_EXTRA_KINDS: tuple[str, ...] = (
    "PostToolUseFailure",
    "PostToolBatch",
    "PermissionDenied",
    "SubagentStart",
    "PostCompact",
    "Setup",
    "StopFailure",
    "TeammateIdle",
    "TaskCreated",
    "TaskCompleted",
    "ConfigChange",
    "CwdChanged",
    "FileChanged",
    "InstructionsLoaded",
    "WorktreeCreate",
    "WorktreeRemove",
    "Elicitation",
    "ElicitationResult",
    "UserPromptExpansion",
    "PostModelSwitch",
    "MessageDisplay",
    "DirectoryAdded",
)

#: Gemini CLI and Codex hook events with no canonical kind; each is accepted
#: under its own name as a non-blocking, observe-only kind.
AGENT_CLI_EXTRA_KINDS: tuple[str, ...] = (
    "BeforeToolSelection",
    "PreModelRequest",
    "PostModelRequest",
    "Interrupt",
)


@dataclass(frozen=True)
class Catalogue:
    """An immutable lookup table from any accepted name to its :class:`KindSpec`."""

    specs: tuple[KindSpec, ...]
    _index: Mapping[str, KindSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, KindSpec] = {}
        for spec in self.specs:
            for name in (spec.kind, *spec.aliases):
                index[normalise(name)] = spec
        object.__setattr__(self, "_index", index)

    def resolve(self, name: str) -> KindSpec:
        """The spec for ``name`` (canonical, alias or extra); raises UnknownEventKind."""
        spec = self._index.get(normalise(name))
        if spec is None:
            raise UnknownEventKind(name, self.kinds())
        return spec

    def canonical(self, name: str) -> str:
        """The canonical kind name for ``name``."""
        return self.resolve(name).kind

    def get(self, name: str) -> KindSpec | None:
        return self._index.get(normalise(name))

    def kinds(self) -> list[str]:
        """Every canonical kind name, in table order."""
        return [spec.kind for spec in self.specs]

    def with_custom(self, custom: Mapping[str, bool] | Iterable[str]) -> Catalogue:
        """A catalogue extended by custom kinds from config.

        ``custom`` maps a kind name to whether a producer may send it blocking (a plain list
        of names means "non-blocking, may not block"). Custom kinds are observe-only unless
        they may block, in which case hooks may deny them and add context.
        """
        items = custom.items() if isinstance(custom, Mapping) else ((k, False) for k in custom)
        extra: list[KindSpec] = []
        for name, may_block in items:
            if normalise(name) in self._index:
                continue
            extra.append(
                KindSpec(
                    kind=name,
                    blocking=False,
                    may_block=bool(may_block),
                    verdicts=frozenset({"deny"}) if may_block else frozenset(),
                    context=bool(may_block),
                    description="custom kind declared in config",
                    custom=True,
                )
            )
        return Catalogue((*self.specs, *extra)) if extra else self


def _default_specs() -> tuple[KindSpec, ...]:
    extra = tuple(
        KindSpec(
            kind=name,
            blocking=False,
            may_block=False,
            description="Claude Code event; observe only",
        )
        for name in CLAUDE_CODE_EXTRA_KINDS
    ) + tuple(
        KindSpec(
            kind=name,
            blocking=False,
            may_block=False,
            description="Gemini CLI / Codex event; observe only",
        )
        for name in AGENT_CLI_EXTRA_KINDS
    )
    return CANONICAL_KINDS + extra


#: The built-in catalogue (pure data, built at import without any I/O).
DEFAULT_CATALOGUE = Catalogue(_default_specs())
