"""The action kinds, as one table: everything hookbus knows about a kind is its row.

A hook's ``[action.<kind>]`` says how its work is done. Each kind is one :class:`ActionKind`
in :data:`ACTION_KINDS`: its name, its pydantic model, how it is built into a callable at
registration, how ``hookbus hooks info`` describes it without building it, whether it runs
code (and so can be slow), which of its fields hold a command, a path or a URL the security
audit must read, the static checks ``hookbus hooks validate`` makes, its ``hooks create``
scaffold and the names of its YAML ``handler.kind``. Nothing else in hookbus switches on a
kind's name: the manifest's ``[action]`` model (:data:`ActionSpec`) is made from the table,
and the registry, the loader, ``hooks info``, the scaffold and the audit read the rows
(against raw manifest data, through :mod:`hookbus.hooks.actions.raw`).

Adding a kind: its model in :mod:`hookbus.hooks.actions.models`, its callable in
:mod:`hookbus.hooks.actions`, and a row here (``tests/unit/test_action_kinds.py`` fails
until every field of the model is either declared to the audit or said not to be a target).

The build functions import their action module when called, so reading a manifest does not
load what running one needs (``httpx``, the subprocess machinery).
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import create_model

from hookbus import defaults
from hookbus.errors import HookBusError, HookRegistrationError
from hookbus.hooks.actions.models import (
    ActionSpecBase,
    HttpAction,
    LlmAction,
    NoneAction,
    PromptInjectAction,
    PythonAction,
    ShellAction,
    WakeAction,
)
from hookbus.hooks.spec_models import StrictModel

if TYPE_CHECKING:
    from hookbus.hooks.manifest_model import HookManifest
    from hookbus.hooks.registry import HookRegistry

#: What a field holds, for the audit: a command line (string or argv), a working directory,
#: a python entrypoint (``module:function``, its module possibly a path), a URL, or a
#: mapping of environment variables or of HTTP headers (their values may carry secrets).
AuditTarget = Literal["command", "workdir", "entrypoint", "url", "env", "headers"]


@dataclass(frozen=True)
class Built:
    """An action built for the chain: ``call(arg, timeout, under_deadline=False)`` runs it;
    ``direct`` is the plain function of a sync python action (the chain's inline fast path)
    or None; ``handler`` says what runs (``hooks info``); ``isolate`` is a python action's
    thread choice; ``prepend`` puts the context a hook adds before the others'."""

    call: Callable[..., Any]
    handler: str
    direct: Callable[[Any], Any] | None = None
    isolate: bool | None = None
    prepend: bool = False


@dataclass(frozen=True)
class Scaffold:
    """What ``hookbus hooks create --action <kind>`` writes: the ``[action.<kind>]`` lines of
    HOOK.toml (``{timeout}`` filled in with a timeout that fits the event's deadline) and
    the handler files (``{name}`` and ``{event}`` filled in)."""

    toml: tuple[str, ...]
    files: Mapping[str, str] = field(default_factory=dict)


def _no_problems(manifest: HookManifest) -> list[tuple[str, str]]:
    return []


@dataclass(frozen=True)
class ActionKind:
    """One action kind: the single place hookbus learns about it."""

    #: The key under ``[action]`` in HOOK.toml.
    name: str
    #: The pydantic model of ``[action.<name>]``.
    model: type[StrictModel]
    #: Builds the callable at registration; raises HookRegistrationError naming the hook.
    build: Callable[[HookRegistry, HookManifest], Built]
    #: What runs, in words, without building it (``hookbus hooks info``); the security
    #: env allow-list is the second argument.
    describe: Callable[[HookManifest, tuple[str, ...]], str]
    #: False when no hook code runs (it cannot be slow, so no deadline warning).
    runs_code: bool
    #: Fields of the model the security audit must read, and what each holds.
    audit_fields: Mapping[str, AuditTarget]
    #: Static checks of what the action points at: ``(field path, problem)`` pairs.
    check: Callable[[HookManifest], list[tuple[str, str]]] = _no_problems
    #: What ``hooks create`` writes; None when the kind cannot be scaffolded.
    scaffold: Scaffold | None = None
    #: Other names of the kind as a YAML single-file hook's ``handler.kind``.
    yaml_names: tuple[str, ...] = ()
    #: Keys of a YAML ``handler`` renamed to the model's fields (when the field is not given).
    yaml_renames: Mapping[str, str] = field(default_factory=dict)
    #: The hook's timeout when the model has no ``timeout_secs``, in seconds.
    default_timeout_s: float = defaults.DEFAULT_HOOK_TIMEOUT_S
    #: Building it imports the hook's own code (a release does not build such hooks: each
    #: worker judges the code it imports).
    imports_code: bool = False
    #: The kind does nothing by itself: a hook may use it only beside fleet-wide rules
    #: (``[limit]``, ``[lock]``, ``[escalate]``), and one that has only ``[escalate]`` is not
    #: run in the chain at all. A manifest with such rules and no ``[action]`` gets it.
    rules_only: bool = False


_Model = TypeVar("_Model", bound=StrictModel)


def _spec(manifest: HookManifest, model: type[_Model]) -> _Model:
    """The manifest's action section, as the model its row says it is."""
    spec = manifest.action.spec
    assert isinstance(spec, model)
    return spec


def _agent(manifest: HookManifest) -> bool:
    return bool(manifest.agent_authored)


# --- python ------------------------------------------------------------------------------


def _build_python(registry: HookRegistry, manifest: HookManifest) -> Built:
    from hookbus.hooks.actions.python import python_call

    spec = _spec(manifest, PythonAction)
    call = python_call(
        manifest.name,
        spec.entrypoint,
        manifest.folder,
        isolate=spec.isolate,
        agent=_agent(manifest),
        allow_unconfined=registry.allow_unconfined_agent_hooks,
    )
    fn = call.fn
    where = getattr(getattr(fn, "__code__", None), "co_filename", None) or getattr(
        fn, "__module__", "?"
    )
    return Built(
        call,
        f"{where}:{getattr(fn, '__name__', '?')}",
        direct=None if call.is_async else fn,
        isolate=spec.isolate,
    )


def _describe_python(manifest: HookManifest, env_allowlist: tuple[str, ...]) -> str:
    module, _, function = _spec(manifest, PythonAction).entrypoint.partition(":")
    local = manifest.folder / (module.replace(".", "/") + ".py")
    if local.is_file():
        return f"{local.resolve()}:{function}"
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    origin = found.origin if found is not None else f"{module} (not found)"
    return f"{origin}:{function}"


def _check_python(manifest: HookManifest) -> list[tuple[str, str]]:
    module = _spec(manifest, PythonAction).entrypoint.partition(":")[0]
    folder = manifest.folder
    local = folder / (module.replace(".", "/") + ".py")
    package = folder / module.replace(".", "/") / "__init__.py"
    if local.is_file() or package.is_file() or (folder / module.split(".")[0]).is_dir():
        return []
    try:
        found = importlib.util.find_spec(module.split(".")[0])
    except (ImportError, ValueError):
        found = None
    if found is not None:
        return []
    return [
        ("action.python.entrypoint", f"module {module!r} is neither in {folder} nor importable")
    ]


_PYTHON_STUB = '''"""{name}: runs on {event}. See docs/hooks.md for what a hook may answer."""

from __future__ import annotations

from typing import Any


def handle(event: Any) -> dict[str, Any] | None:
    """Return None to continue, or a dict such as {{"outcome": "deny", "reason": "..."}}."""
    return None
'''

# --- shell -------------------------------------------------------------------------------


def _build_shell(registry: HookRegistry, manifest: HookManifest) -> Built:
    from hookbus.hooks.actions.shell import ShellCall

    shell = ShellCall.from_manifest(
        manifest,
        env_allowlist=registry.env_allowlist,
        allow_unconfined_agent_hooks=registry.allow_unconfined_agent_hooks,
        agent_env_allowlist=registry.agent_policy.env_allowlist,
    )
    return Built(shell, shell.describe())


def _describe_shell(manifest: HookManifest, env_allowlist: tuple[str, ...]) -> str:
    from hookbus.hooks.actions.shell import ShellCall

    try:
        call = ShellCall.from_manifest(manifest, env_allowlist=env_allowlist)
    except HookBusError as exc:
        return f"(invalid: {exc})"
    return f"{call.describe()}  (in {call.cwd})"


def _check_shell(manifest: HookManifest) -> list[tuple[str, str]]:
    spec = _spec(manifest, ShellAction)
    if spec.shell:
        return []  # a shell line: what it runs is the shell's business
    where = "action.shell.command"
    try:
        argv = shlex.split(spec.command) if isinstance(spec.command, str) else list(spec.command)
    except ValueError as exc:
        return [(where, f"cannot split: {exc}")]
    first = argv[0] if argv else ""
    if not first or os.path.isabs(first):
        return []
    if "/" in first:
        if (manifest.folder / first).is_file():
            return []
        return [(where, f"{first} does not exist in {manifest.folder}")]
    # the shell action runs python and python3 as sys.executable
    if first in ("python", "python3") or shutil.which(first) is not None:
        return []
    hint = (
        f" (to run the file in the hook folder write ./{first})"
        if (manifest.folder / first).is_file()
        else ""
    )
    return [(where, f"{first!r} is not on PATH{hint}")]


_SHELL_STUB = """#!/bin/sh
# {name}: runs on {event}. The event arrives as JSON on stdin.
# Answer: exit 0 and print nothing (continue), exit 0 and print one JSON object
# (e.g. {{"outcome": "deny", "reason": "..."}}), or exit 2 with a reason on stderr (deny).
cat > /dev/null
exit 0
"""

# --- http --------------------------------------------------------------------------------


def _build_http(registry: HookRegistry, manifest: HookManifest) -> Built:
    from hookbus.hooks.actions.http import HttpCall

    return Built(HttpCall.from_manifest(manifest, registry=registry), _describe_http(manifest, ()))


def _describe_http(manifest: HookManifest, env_allowlist: tuple[str, ...]) -> str:
    spec = _spec(manifest, HttpAction)
    return f"{spec.method} {spec.url}"


# --- llm ---------------------------------------------------------------------------------


def _build_llm(registry: HookRegistry, manifest: HookManifest) -> Built:
    from hookbus.hooks.actions.llm import JudgeCall

    call = JudgeCall.from_manifest(manifest, registry=registry)
    return Built(call, call.describe())


def _describe_llm(manifest: HookManifest, env_allowlist: tuple[str, ...]) -> str:
    spec = _spec(manifest, LlmAction)
    return f"llm {spec.model} at {spec.endpoint}"


# --- prompt_inject -----------------------------------------------------------------------


def _build_prompt_inject(registry: HookRegistry, manifest: HookManifest) -> Built:
    from hookbus.hooks.actions.prompt import PromptInject

    spec = _spec(manifest, PromptInjectAction)
    return Built(
        PromptInject(spec.content),
        _describe_prompt_inject(manifest, ()),
        prepend=spec.position == "prepend",
    )


def _describe_prompt_inject(manifest: HookManifest, env_allowlist: tuple[str, ...]) -> str:
    return f"prompt_inject ({_spec(manifest, PromptInjectAction).position})"


# --- wake --------------------------------------------------------------------------------


def _build_wake(registry: HookRegistry, manifest: HookManifest) -> Built:
    from hookbus.hooks.actions.wake import WakeCall

    wake = WakeCall.from_manifest(manifest, registry=registry)
    return Built(wake, wake.describe())


def _describe_wake(manifest: HookManifest, env_allowlist: tuple[str, ...]) -> str:
    spec = _spec(manifest, WakeAction)
    if spec.url is not None:
        return f"wake: POST {spec.url}"
    command = spec.command
    return f"wake: {command if isinstance(command, str) else ' '.join(command or [])}"


# --- none --------------------------------------------------------------------------------


def _no_action(arg: Any, timeout: float | None = None, *rest: Any) -> None:
    """The action of a hook that is only its fleet-wide rules: continue."""
    return None


def _build_none(registry: HookRegistry, manifest: HookManifest) -> Built:
    return Built(_no_action, "no action (its fleet-wide rules only)")


def _describe_none(manifest: HookManifest, env_allowlist: tuple[str, ...]) -> str:
    return "no action: the hook is its [limit] / [lock] / [escalate]"


# --- the table ---------------------------------------------------------------------------

_KINDS = (
    ActionKind(
        name="python",
        model=PythonAction,
        build=_build_python,
        describe=_describe_python,
        runs_code=True,
        audit_fields={"entrypoint": "entrypoint"},
        imports_code=True,
        check=_check_python,
        scaffold=Scaffold(
            ('entrypoint = "handler:handle"', "timeout_secs = {timeout}"),
            {"handler.py": _PYTHON_STUB},
        ),
        yaml_renames={"command": "entrypoint"},
    ),
    ActionKind(
        name="shell",
        model=ShellAction,
        build=_build_shell,
        describe=_describe_shell,
        runs_code=True,
        audit_fields={"command": "command", "workdir": "workdir", "env": "env"},
        check=_check_shell,
        scaffold=Scaffold(
            ('command = "./handler.sh"', "timeout_secs = {timeout}"), {"handler.sh": _SHELL_STUB}
        ),
        yaml_names=("script", "command"),
    ),
    ActionKind(
        name="http",
        model=HttpAction,
        build=_build_http,
        describe=_describe_http,
        runs_code=True,
        audit_fields={"url": "url", "headers": "headers"},
        scaffold=Scaffold(
            (
                "# your service's https URL: it receives the event as JSON (a loopback or",
                "# private address needs security.allow_private_http = true in hookbus.toml)",
                'url = "https://hooks.example.com/hookbus"',
                "timeout_secs = {timeout}",
            )
        ),
    ),
    ActionKind(
        name="llm",
        model=LlmAction,
        build=_build_llm,
        describe=_describe_llm,
        runs_code=True,
        audit_fields={"endpoint": "url", "api_key_env": "env"},
        default_timeout_s=2.0,
        scaffold=Scaffold(
            (
                "# your OpenAI-compatible chat completions server (vLLM, llama.cpp, Ollama, a",
                "# proxy; a loopback or private address needs security.allow_private_http)",
                'endpoint = "https://judge.example.com/v1"',
                'model = "guard-small"',
                '# api_key_env = "JUDGE_API_KEY"   # its variable, listed in requires.env',
                'instructions = "You decide whether an AI agent\'s tool call may run."',
                'input = "{{payload.tool_input}}"',
                "timeout_secs = {timeout}",
                'cache_ttl = "10m"',
            )
        ),
    ),
    ActionKind(
        name="prompt_inject",
        model=PromptInjectAction,
        build=_build_prompt_inject,
        describe=_describe_prompt_inject,
        runs_code=False,
        audit_fields={},
        scaffold=Scaffold(
            ('content = "Reminder: follow the project rules."', 'position = "append"')
        ),
    ),
    ActionKind(
        name="wake",
        model=WakeAction,
        build=_build_wake,
        describe=_describe_wake,
        runs_code=True,
        audit_fields={"command": "command", "url": "url", "headers": "headers", "env": "env"},
    ),
    ActionKind(
        name="none",
        model=NoneAction,
        build=_build_none,
        describe=_describe_none,
        runs_code=False,
        audit_fields={},
        default_timeout_s=defaults.DEFAULT_RULE_TIMEOUT_S,
        rules_only=True,
    ),
)

#: Every action kind by name, in the order ``[action]`` lists them.
ACTION_KINDS: Mapping[str, ActionKind] = MappingProxyType({kind.name: kind for kind in _KINDS})

if TYPE_CHECKING:
    ActionSpec = ActionSpecBase
else:
    #: The manifest's ``[action]``: one optional field per kind of the table.
    ActionSpec = create_model(
        "ActionSpec",
        __base__=ActionSpecBase,
        __module__=__name__,
        **{kind.name: (kind.model | None, None) for kind in _KINDS},
    )


def action_kind(manifest: HookManifest) -> ActionKind:
    """The row of a (validated) manifest's action."""
    return ACTION_KINDS[manifest.action.kind]


def build_action(registry: HookRegistry, manifest: HookManifest) -> Built:
    """Build a manifest's action for the chain; raises HookRegistrationError naming the hook."""
    kind = ACTION_KINDS.get(manifest.action.kind)
    if kind is None:  # pragma: no cover - the model accepts only the table's kinds
        raise HookRegistrationError(manifest.name, f"unknown action kind {manifest.action.kind!r}")
    return kind.build(registry, manifest)
