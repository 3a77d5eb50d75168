"""The pydantic models of the action kinds, one per ``[action.<kind>]`` of HOOK.toml, and the
base of the ``[action]`` model. Which kinds exist, and everything else about them, is the
table in :mod:`hookbus.hooks.actions.kinds`, which also makes ``[action]`` from this base.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from hookbus import defaults
from hookbus.hooks.spec_models import MAX_LIST, StrictModel

_ENTRYPOINT_RE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*\Z")


class PythonAction(StrictModel):
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


class ShellAction(StrictModel):
    """Run a command with the event as JSON on stdin (exit 0: its stdout is the answer; exit 2:
    deny, stderr the reason; other codes as ``exit_codes`` maps them, else an error).

    ``command`` is split like a shell would (``shlex``) and run without a shell unless
    ``shell = true``. ``workdir`` is relative to the hook folder and must stay inside it
    unless ``allow_workdir_outside = true``.
    """

    command: str | list[str]
    timeout_secs: float = Field(default=defaults.DEFAULT_HOOK_TIMEOUT_S, gt=0)
    workdir: str | None = None
    env: dict[str, str] = Field(default_factory=dict, max_length=MAX_LIST)
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


class HttpAction(StrictModel):
    """POST (or ``method``) the event JSON to ``url``; a 2xx JSON body is the result.

    Header values may reference environment variables as ``${NAME}`` when ``NAME`` is in
    the security env allow-list or in the manifest's ``requires.env``.
    """

    url: str
    method: Literal["POST", "PUT", "PATCH"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict, max_length=MAX_LIST)
    timeout_secs: float = Field(default=defaults.DEFAULT_HOOK_TIMEOUT_S, gt=0)
    #: A longer answer is an error (decided by ``on_error``), read no further than this.
    max_response_bytes: int = Field(default=defaults.DEFAULT_OUTPUT_CAP_BYTES, gt=0)

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


#: ``cache_ttl`` as written: seconds, or a number with ``s``, ``m`` or ``h``.
_TTL_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([smh]?)\Z")
_TTL_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


class LlmAction(StrictModel):
    """Ask a language model for the verdict: an OpenAI-compatible chat completions server at
    ``endpoint`` (``.../v1``), ``model``, told ``instructions`` and shown ``input`` (a
    template of the event, as data in a message of its own). Its answer must be the JSON
    ``{"outcome": "allow" | "deny" | "ask", "reason": "..."}``; anything else is the hook's
    failure (its ``on_error`` decides). ``api_key_env`` names the variable holding the key.
    Verdicts are shared fleet-wide for ``cache_ttl`` (0: not cached); at most
    ``max_concurrency`` calls per endpoint run at once in one worker process."""

    endpoint: str
    model: str
    instructions: str
    input: str = "{payload}"
    api_key_env: str | None = None
    timeout_secs: float = Field(default=2.0, gt=0)
    cache_ttl: float = Field(default=0.0, ge=0)
    max_concurrency: int = Field(default=8, ge=1, le=256)
    #: most model calls a second to the endpoint from one worker process (0: no bound)
    max_rate: float = Field(default=0.0, ge=0)
    max_tokens: int = Field(default=300, ge=16, le=4096)
    #: ask for the JSON shape as a ``response_format`` JSON schema (off for servers without)
    json_schema: bool = True

    @field_validator("endpoint")
    @classmethod
    def _endpoint_scheme(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/")

    @field_validator("instructions", "model")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("cache_ttl", mode="before")
    @classmethod
    def _ttl(cls, value: Any) -> Any:
        if isinstance(value, str):
            found = _TTL_RE.match(value.strip())
            if found is None:
                raise ValueError('give seconds, or a number with s, m or h (e.g. "10m")')
            return float(found.group(1)) * _TTL_UNITS[found.group(2)]
        return value


class PromptInjectAction(StrictModel):
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


class WakeAction(StrictModel):
    """Wake the supervising agent of a managed session: ``command``
    (split like a shell would, the placeholders ``{agent_id}``, ``{openclaw_session_id}``
    and ``{tmux_session_name}`` filled per argument, the message on stdin) or ``url`` (a
    JSON POST). Built by :mod:`hookbus.hooks.actions.wake`."""

    command: str | list[str] | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, max_length=MAX_LIST)
    env: dict[str, str] = Field(default_factory=dict, max_length=MAX_LIST)
    # a bidirectional wake waits for the supervisor, up to 10 minutes
    timeout_secs: float = Field(default=600.0, gt=0, le=600)
    max_output_bytes: int = Field(default=defaults.DEFAULT_OUTPUT_CAP_BYTES, gt=0)

    @model_validator(mode="after")
    def _one_target(self) -> WakeAction:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command or url")
        command = self.command
        if command is not None and (
            (isinstance(command, str) and not command.strip())
            or (isinstance(command, list) and not command)
        ):
            raise ValueError("command must not be empty")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return self


class NoneAction(StrictModel):
    """No action: the hook is its fleet-wide rules (``[limit]``, ``[lock]``, ``[escalate]``)
    and nothing else. A manifest that declares such a rule may leave ``[action]`` out; it is
    read as ``[action.none]``, which answers continue."""


class ActionSpecBase(StrictModel):
    """``[action]``: exactly one kind's section. Its fields, one per kind, are added by
    :mod:`hookbus.hooks.actions.kinds` from its table."""

    @model_validator(mode="after")
    def _exactly_one(self) -> ActionSpecBase:
        names = list(type(self).model_fields)
        given = [k for k in names if getattr(self, k) is not None]
        if len(given) != 1:
            listed = ", ".join(f"[action.{k}]" for k in names)
            raise ValueError(f"give exactly one of {listed} (got {len(given)}: {', '.join(given)})")
        return self

    @property
    def kind(self) -> str:
        """The name of the kind given."""
        for name in type(self).model_fields:
            if getattr(self, name) is not None:
                return name
        raise AssertionError("validated ActionSpec without an action")  # pragma: no cover

    @property
    def spec(self) -> StrictModel:
        """The model of the kind given."""
        value = getattr(self, self.kind)
        assert isinstance(value, StrictModel)
        return value
