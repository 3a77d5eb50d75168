"""Hook manifests: what a hook file says, in three forms, parsed into one pydantic model.

A hook is described by ``hooks/<name>/HOOK.toml`` (the primary form), by
``hooks/<name>/HOOK.md`` with YAML frontmatter (MicroClaw's form: ``name``, ``description``,
``events``, ``command``, ``timeout``, ``requires``), or by a single ``hooks/<name>.yaml``
(seed 001's form: ``id``, ``event_type``, ``summary``, ``handler {kind, command}``...). Each
form is first rewritten into the TOML form's field names, then validated once by
:class:`HookManifest`. Errors are :class:`~hookbus.errors.ManifestError` naming the file,
the field *as the author spelled it* and the reason, e.g.
``hooks/guard/HOOK.toml: action.shell.timeout_secs: must be > 0``.

pydantic is used here only: manifests are written by people and deserve good messages. The
registry compiles a manifest into plain objects once, so nothing here runs per event.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from hookbus import defaults
from hookbus.bus.kinds import DEFAULT_CATALOGUE, Catalogue
from hookbus.errors import ManifestError, UnknownEventKind

TOML_FILENAME = "HOOK.toml"
MARKDOWN_FILENAME = "HOOK.md"
YAML_SUFFIXES = (".yaml", ".yml")

ManifestForm = Literal["toml", "markdown", "yaml"]
OnError = Literal["allow", "deny"]
ExitOutcome = Literal["continue", "allow", "deny", "ask", "halt", "error"]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ENTRYPOINT_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class _Model(BaseModel):
    """Frozen and strict about unknown fields, so a typo is an error and not a no-op."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def _str_list(value: Any) -> Any:
    """Accept one string where a list of strings is expected (``tools = "Bash"``)."""
    if isinstance(value, str):
        return [value]
    return value


class MatchSpec(_Model):
    """Conditions selecting the events a hook runs on; every given condition must hold.

    Globs (``*``, ``?``, ``[...]``; ``*`` also crosses ``/``) are matched case-sensitively.
    ``pattern`` is a regular expression searched in the payload field ``field`` (a dotted
    path such as ``tool_input.command``; the whole payload as JSON when no field is named).
    """

    agents: list[str] = Field(default_factory=list)
    sessions: list[str] = Field(default_factory=list)
    channels: list[str] = Field(default_factory=list)
    users: list[str] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    ability_scope: list[str] = Field(default_factory=list)
    callers: list[Literal["ai_session", "background_job", "ci_pipeline", "manual_cli"]] = Field(
        default_factory=list
    )
    pattern: str | None = None
    field: str | None = None
    min_duration_ms: int | None = Field(default=None, ge=0)
    only_if_changed_paths: list[str] = Field(default_factory=list)

    @field_validator(
        "agents",
        "sessions",
        "channels",
        "users",
        "tools",
        "ability_scope",
        "callers",
        "only_if_changed_paths",
        mode="before",
    )
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return _str_list(value)

    @field_validator("pattern")
    @classmethod
    def _pattern_compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from exc
        return value

    def is_empty(self) -> bool:
        return self == _EMPTY_MATCH

    def summary(self) -> str:
        """One short line for ``hookbus hooks list`` (seed 001 §7.1's match_summary)."""
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
        return " ".join(parts) or "all events"


_EMPTY_MATCH = MatchSpec()


class PythonAction(_Model):
    """Call ``module:function`` in-process. The module is looked up in the hook's folder
    first (the folder is put on the import path), then on the normal import path.

    ``isolate``: ``true`` runs every call in a worker thread that is abandoned at the
    timeout; ``false`` always calls inline; unset (default) calls inline unless the request
    has a deadline, then in a worker thread.
    """

    entrypoint: str
    timeout_secs: float = Field(default=defaults.DEFAULT_HOOK_TIMEOUT_S, gt=0)
    isolate: bool | None = None

    @field_validator("entrypoint")
    @classmethod
    def _entrypoint_form(cls, value: str) -> str:
        if not _ENTRYPOINT_RE.match(value):
            raise ValueError("must look like 'module:function' (e.g. 'handler:run')")
        return value


class ShellAction(_Model):
    """Run a command with the event as JSON on stdin (see DESIGN §4 for the exit codes).

    ``command`` is split like a shell would (``shlex``) and run without a shell unless
    ``shell = true``. ``workdir`` is relative to the hook folder and must stay inside it
    unless ``allow_workdir_outside = true``.
    """

    command: str | list[str]
    timeout_secs: float = Field(default=defaults.DEFAULT_HOOK_TIMEOUT_S, gt=0)
    workdir: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    shell: bool = False
    max_output_bytes: int = Field(default=defaults.DEFAULT_OUTPUT_CAP_BYTES, gt=0)
    allow_workdir_outside: bool = False

    @field_validator("command")
    @classmethod
    def _command_not_empty(cls, value: str | list[str]) -> str | list[str]:
        if (isinstance(value, str) and not value.strip()) or (
            isinstance(value, list) and not value
        ):
            raise ValueError("must not be empty")
        return value


class HttpAction(_Model):
    """POST (or ``method``) the event JSON to ``url``; a 2xx JSON body is the result.

    Header values may reference environment variables as ``${NAME}`` when ``NAME`` is in
    the security env allow-list or in the manifest's ``requires.env``.
    """

    url: str
    method: Literal["POST", "PUT", "PATCH"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_secs: float = Field(default=defaults.DEFAULT_HOOK_TIMEOUT_S, gt=0)

    @field_validator("url")
    @classmethod
    def _url_scheme(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

    @field_validator("method", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


class PromptInjectAction(_Model):
    """Add static ``content`` to the agent's context, before (prepend) or after (append)
    what other hooks add."""

    content: str
    position: Literal["prepend", "append"] = "append"

    @field_validator("content")
    @classmethod
    def _content_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value


class WakeAction(BaseModel):
    """Wake a supervising agent (DESIGN §7). Accepted in manifests so that they validate,
    but not implemented by this registry yet: registering one is an error."""

    model_config = ConfigDict(frozen=True, extra="allow")


ActionKind = Literal["python", "shell", "http", "prompt_inject", "wake"]
ACTION_KINDS: tuple[ActionKind, ...] = ("python", "shell", "http", "prompt_inject", "wake")


class ActionSpec(_Model):
    """Exactly one of the action kinds."""

    python: PythonAction | None = None
    shell: ShellAction | None = None
    http: HttpAction | None = None
    prompt_inject: PromptInjectAction | None = None
    wake: WakeAction | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> ActionSpec:
        given = [k for k in ACTION_KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of [action.python], [action.shell], [action.http], "
                f"[action.prompt_inject], [action.wake] (got {len(given)}: {', '.join(given)})"
            )
        return self

    @property
    def kind(self) -> ActionKind:
        for name in ACTION_KINDS:
            if getattr(self, name) is not None:
                return name
        raise AssertionError("validated ActionSpec without an action")  # pragma: no cover

    @property
    def spec(self) -> PythonAction | ShellAction | HttpAction | PromptInjectAction | WakeAction:
        value = getattr(self, self.kind)
        assert value is not None
        return value  # type: ignore[no-any-return]


class ModifySpec(_Model):
    """Which payload keys a hook may change. ``tool_input.command`` names a nested key; a
    bare ``command`` that is not a modifiable top-level key means that key inside each
    modifiable top-level key (so ``command`` allows ``tool_input.command`` on PreToolUse)."""

    allow_keys: list[str] = Field(default_factory=list)

    @field_validator("allow_keys", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return _str_list(value)


class RequiresSpec(_Model):
    """What must hold for the hook to load: OS names (``linux``, ``darwin``, ``windows``),
    binaries on PATH, environment variables set."""

    os: list[str] = Field(default_factory=list)
    bins: list[str] = Field(default_factory=list)
    env: list[str] = Field(default_factory=list)

    @field_validator("os", "bins", "env", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return _str_list(value)


class RetrySpec(_Model):
    """How often the bus retries a failed non-blocking run before dead-lettering it."""

    count: int = Field(default=0, ge=0, le=100)
    intervals_s: list[int] = Field(default_factory=list)

    @field_validator("intervals_s")
    @classmethod
    def _non_negative(cls, value: list[int]) -> list[int]:
        if any(v < 0 for v in value):
            raise ValueError("intervals must be >= 0 seconds")
        return value


class BatchSpec(_Model):
    """Run a non-blocking hook on batches of events instead of one job per event."""

    max_events: int = Field(default=100, gt=0)
    max_wait_ms: int = Field(default=1000, gt=0)


class HookManifest(_Model):
    """One hook, whatever file form it came from (DESIGN §4).

    ``events`` hold canonical kind names (aliases are resolved on load). ``source_path`` is
    the manifest file and ``folder`` the hook's folder (the YAML file's parent for the
    single-file form): actions run relative to it.
    """

    name: str
    description: str = ""
    version: str = "0.1.0"
    events: list[str]
    priority: int = Field(default=defaults.DEFAULT_PRIORITY, ge=-1_000_000, le=1_000_000)
    enabled: bool = True
    blocking: bool | None = None
    on_error: OnError = "allow"
    match: MatchSpec = Field(default_factory=MatchSpec)
    action: ActionSpec
    modify: ModifySpec = Field(default_factory=ModifySpec)
    requires: RequiresSpec = Field(default_factory=RequiresSpec)
    effects: list[Any] = Field(default_factory=list)
    skip_security_audit: bool = False
    exit_codes: dict[int, ExitOutcome] = Field(default_factory=dict)
    retries: RetrySpec = Field(default_factory=RetrySpec)
    batch: BatchSpec | None = None
    source_path: Path = Path(TOML_FILENAME)
    folder: Path = Path()
    form: ManifestForm = "toml"

    @model_validator(mode="before")
    @classmethod
    def _singular_event(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "event" in data and "events" not in data:
            data = dict(data)
            data["events"] = data.pop("event")
        return data

    @field_validator("name")
    @classmethod
    def _name_form(cls, value: str) -> str:
        if not _NAME_RE.match(value):
            raise ValueError(
                "must be 1-64 letters, digits, '-', '_' or '.', starting with a letter or digit"
            )
        return value

    @field_validator("priority", mode="before")
    @classmethod
    def _priority_int(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("must be an integer (lower runs first; default 100)")
        return value

    @field_validator("events", mode="before")
    @classmethod
    def _events_canonical(cls, value: Any, info: ValidationInfo) -> Any:
        value = _str_list(value)
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
        return self

    @property
    def timeout_s(self) -> float:
        """The action's timeout in seconds (prompt_inject and wake: the default)."""
        spec = self.action.spec
        timeout = getattr(spec, "timeout_secs", None)
        return float(timeout) if timeout is not None else defaults.DEFAULT_HOOK_TIMEOUT_S

    @property
    def action_kind(self) -> ActionKind:
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


# --- the three forms ----------------------------------------------------------------------


def _flatten_hook_table(data: dict[str, Any]) -> dict[str, Any]:
    """Accept seed 000's ``[hook]`` table as well as top-level fields."""
    hook = data.get("hook")
    if isinstance(hook, dict):
        rest = {k: v for k, v in data.items() if k != "hook"}
        return {**hook, **rest}
    return data


def parse_toml(
    text: str, path: Path, *, folder: Path | None = None, catalogue: Catalogue = DEFAULT_CATALOGUE
) -> HookManifest:
    """Parse a ``HOOK.toml``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(str(path), None, f"not valid TOML: {exc}") from None
    data = _flatten_hook_table(data)
    if "conditions" in data and "match" not in data:
        data["match"] = data.pop("conditions")
    return manifest_from_data(
        data, path=path, folder=folder or path.parent, form="toml", catalogue=catalogue
    )


_FRONTMATTER_RE = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


def split_frontmatter(text: str) -> tuple[str, str] | None:
    """``(frontmatter, body)`` of a Markdown file, or None when it has no frontmatter."""
    found = _FRONTMATTER_RE.match(text)
    if found is None:
        return None
    return found.group(1), text[found.end() :]


def _yaml_mapping(text: str, path: Path, what: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ManifestError(
            str(path), None, f"{what} is not valid YAML{where}: {problem}"
        ) from None
    if not isinstance(data, dict):
        raise ManifestError(str(path), None, f"{what} must be a YAML mapping of fields")
    return {str(k): v for k, v in data.items()}


def parse_markdown(
    text: str, path: Path, *, folder: Path | None = None, catalogue: Catalogue = DEFAULT_CATALOGUE
) -> HookManifest:
    """Parse a MicroClaw-style ``HOOK.md``: ``command`` / ``timeout`` become a shell action
    whose exit code 1 means deny (MicroClaw's contract) unless ``exit_codes`` says otherwise.
    The Markdown body is the description when the frontmatter has none."""
    parts = split_frontmatter(text)
    if parts is None:
        raise ManifestError(
            str(path), None, "no YAML frontmatter: start the file with '---', the fields, '---'"
        )
    front, body = parts
    data = _yaml_mapping(front, path, "the frontmatter")
    if "command" in data or "timeout" in data:
        if "action" in data:
            raise ManifestError(str(path), "command", "give either command or action, not both")
        shell: dict[str, Any] = {}
        if "command" in data:
            shell["command"] = data.pop("command")
        if "timeout" in data:
            shell["timeout_secs"] = data.pop("timeout")
        data["action"] = {"shell": shell}
        data.setdefault("exit_codes", {1: "deny"})
    if not data.get("description") and body.strip():
        data["description"] = body.strip().splitlines()[0].lstrip("# ").strip()
    return manifest_from_data(
        data, path=path, folder=folder or path.parent, form="markdown", catalogue=catalogue
    )


def parse_yaml(
    text: str, path: Path, *, folder: Path | None = None, catalogue: Catalogue = DEFAULT_CATALOGUE
) -> HookManifest:
    """Parse a seed-001-style single-file hook (``hooks/<name>.yaml``)."""
    data = _yaml_mapping(text, path, "the file")
    renames = {"id": "name", "event_type": "events", "summary": "description"}
    for theirs, ours in renames.items():
        if theirs in data:
            if ours in data:
                raise ManifestError(str(path), theirs, f"give either {theirs} or {ours}, not both")
            data[ours] = data.pop(theirs)
    if isinstance(data.get("description"), str):
        data["description"] = " ".join(data["description"].split())
    if "handler" in data:
        if "action" in data:
            raise ManifestError(str(path), "handler", "give either handler or action, not both")
        data["action"] = _handler_to_action(data.pop("handler"), path)
    return manifest_from_data(
        data, path=path, folder=folder or path.parent, form="yaml", catalogue=catalogue
    )


def _handler_to_action(handler: Any, path: Path) -> dict[str, Any]:
    if not isinstance(handler, dict):
        raise ManifestError(str(path), "handler", "must be a mapping with kind and command")
    handler = dict(handler)
    kind = str(handler.pop("kind", "script"))
    if "timeout" in handler:
        handler["timeout_secs"] = handler.pop("timeout")
    if kind in ("script", "shell", "command"):
        return {"shell": handler}
    if kind == "python":
        if "command" in handler and "entrypoint" not in handler:
            handler["entrypoint"] = handler.pop("command")
        return {"python": handler}
    if kind in ("http", "prompt_inject", "wake"):
        return {kind: handler}
    raise ManifestError(
        str(path),
        "handler.kind",
        f"unknown handler kind {kind!r}; use script, python, http, prompt_inject or wake",
    )


def load_manifest(path: Path, *, catalogue: Catalogue = DEFAULT_CATALOGUE) -> HookManifest:
    """Read and parse one manifest file, choosing the form by its name."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(str(path), None, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ManifestError(str(path), None, "not UTF-8 text") from None
    if path.name == TOML_FILENAME:
        return parse_toml(text, path, catalogue=catalogue)
    if path.name == MARKDOWN_FILENAME:
        return parse_markdown(text, path, catalogue=catalogue)
    if path.suffix in YAML_SUFFIXES:
        return parse_yaml(text, path, catalogue=catalogue)
    raise ManifestError(
        str(path),
        None,
        f"not a hook manifest (expected {TOML_FILENAME}, {MARKDOWN_FILENAME} or <name>.yaml)",
    )
