"""Help texts as a person reads them: real flag syntax, and one example per command.

typer shows each option's Python type: ``<bool>`` after a flag that takes no value,
``<list[str]>``, ``<int range>``, ``<str>`` after an argument. :class:`HelpGroup`, the class
of the root group, rewrites that once the command tree is built: a flag shows nothing, an
option a metavar in capitals (``--hooks-dir DIR``, ``--last LAST``) or its choices
(``chain|fanout|rq``), an argument its name only. It turns reStructuredText literals
(````x````) from docstrings into the backquotes a terminal reader expects, and gives every
command an example from :data:`EXAMPLES` as its epilog (``hookbus X --help`` ends with it).
"""

from __future__ import annotations

import re
from typing import Any

from typer._click.core import Context
from typer.core import TyperArgument, TyperGroup, TyperOption

#: Metavars of options whose name says less than a word would (the rest: the name in capitals).
METAVARS = {
    "--payload": "JSON",
    "--redis-url": "URL",
    "--hooks-dir": "DIR",
    "--config": "FILE",
    "--file": "FILE",
    "--spec": "FILE",
    "--settings": "FILE",
    "--tokens": "FILE",
    "--token-file": "FILE",
    "--interval": "SECONDS",
    "--wait": "SECONDS",
    "--timeout": "SECONDS",
    "--delay": "SECONDS",
    "--deadline-ms": "MS",
    "--port": "PORT",
    "--metrics-port": "PORT",
}

#: One example per command, by its path; commands of the adapter table (``claude-code``...)
#: take theirs from :data:`ADAPTER_EXAMPLES`. tests/cli/test_help_texts.py parses each one
#: against the real command.
EXAMPLES = {
    "publish": 'hookbus publish PreToolUse --wait -p \'{"tool_name": "Bash"}\'',
    "worker": "hookbus worker --role chain --hooks-dir examples/hooks --metrics-port 0",
    "reload": "hookbus reload --hooks-dir examples/hooks --wait 5",
    "status": "hookbus status --json",
    "tail": "hookbus tail --decisions --kind PreToolUse --last 10",
    "dev": "hookbus dev --hooks-dir examples/hooks",
    "demo": "hookbus demo",
    "replay": "hookbus replay --since 1h --hooks-dir examples/hooks",
    "notify": "hookbus notify 'deploy freeze until 18:00' --severity warning --ttl 2h",
    "mcp": "hookbus mcp --hooks-dir examples/hooks",
    "tmux": "hookbus tmux agent-1 snapshot --lines 40",
    "gateway": "hookbus gateway --port 8787 --tokens tokens.json",
    "console": "hookbus console --port 8788 --token-file console.token",
    "doctor": "hookbus doctor claude-code --json",
    "hooks list": "hookbus hooks list --hooks-dir examples/hooks",
    "hooks info": "hookbus hooks info block-destructive --hooks-dir examples/hooks",
    "hooks validate": "hookbus hooks validate --hooks-dir examples/hooks",
    "hooks create": "hookbus hooks create no-force-push --event PreToolUse --action shell",
    "hooks enable": "hookbus hooks enable no-force-push",
    "hooks disable": "hookbus hooks disable no-force-push",
    "hooks run": "hookbus hooks run block-destructive --event event.json",
    "hooks audit": "hookbus hooks audit examples/hooks",
    "hooks write": "hookbus hooks write --spec spec.json --author agent-1",
    "hooks approve": "hookbus hooks approve no-force-push --hooks-dir examples/hooks",
    "hooks reject": "hookbus hooks reject no-force-push --hooks-dir examples/hooks",
    "hooks pending": "hookbus hooks pending --hooks-dir examples/hooks",
    "hooks history": "hookbus hooks history --limit 20",
    "dlq list": "hookbus dlq list --limit 20",
    "dlq show": "hookbus dlq show JOB_ID",
    "dlq requeue": "hookbus dlq requeue --all",
    "dlq purge": "hookbus dlq purge JOB_ID --yes",
    "keys generate": "hookbus keys generate --out keys",
    "state list": "hookbus state list --json",
    "state show": "hookbus state show STATE_ID",
    "state reset": "hookbus state reset STATE_ID",
    "notices list": "hookbus notices list",
    "notices retract": "hookbus notices retract NOTICE_ID",
    "config show": "hookbus config show",
    "agents list": "hookbus agents list",
    "agents show": "hookbus agents show agent-1",
    "agents set": "hookbus agents set agent-1 tmux_session_name=agent-1",
    "agents set-global": "hookbus agents set-global --unset KEY",
    "agents remove": "hookbus agents remove agent-1",
    "agents import": "hookbus agents import registry.json",
    "agents export": "hookbus agents export",
    "approvals list": "hookbus approvals list --watch",
    "approvals allow": "hookbus approvals allow APPROVAL_ID --reason 'looked at it'",
    "approvals deny": "hookbus approvals deny APPROVAL_ID --reason 'not on main'",
    "approvals export": "hookbus approvals export --since 24h > approvals.jsonl",
}

#: The example of each command of an adapter's group, ``{cli}`` standing for its name.
ADAPTER_EXAMPLES = {
    "hook": "hookbus {cli} hook < event.json",
    "install": "hookbus {cli} install --dry-run",
    "uninstall": "hookbus {cli} uninstall --dry-run",
}


def example_of(path: str) -> str | None:
    """The example of the command at ``path`` (``"hooks list"``), if there is one."""
    if path in EXAMPLES:
        return EXAMPLES[path]
    group, _, command = path.rpartition(" ")
    if group and " " not in group and command in ADAPTER_EXAMPLES:
        return ADAPTER_EXAMPLES[command].format(cli=group)
    return None


class _Option(TyperOption):
    def display_type_rich(self, ctx: Context) -> str | None:
        return None if self.is_flag else self.metavar


class _Argument(TyperArgument):
    def display_type_rich(self, ctx: Context) -> str | None:
        return None


def _metavar(option: TyperOption) -> str:
    """Choices as ``a|b``, a known option's name from :data:`METAVARS`, ``N`` for a number,
    else the option's name in capitals."""
    choices, number = _type_of(option)
    if choices:
        return "|".join(str(getattr(c, "value", c)) for c in choices)
    long = max(option.opts, key=len)
    if long in METAVARS:
        return METAVARS[long]
    return "N" if number else long.lstrip("-").replace("-", "_").upper()


def _type_of(option: TyperOption) -> tuple[tuple[Any, ...], bool]:
    """The option's choices (empty when it has none) and whether it takes a number: from
    typer's ``type_descriptor`` (typer 0.29 and later, which has no click ``type`` on the
    option) or from click's parameter type (earlier typer)."""
    described = getattr(option, "type_descriptor", None)
    if described is not None:
        choices = tuple(described.choices or ()) if described.is_choice else ()
        return choices, described.annotation is int
    kind = getattr(option, "type", None)
    number = getattr(kind, "name", "") in ("integer", "integer range")
    return tuple(getattr(kind, "choices", None) or ()), number


#: A reStructuredText role (``:mod:`hookbus.x```, ``:func:`~a.b```).
_ROLE = re.compile(r":(?:func|class|mod|meth|data|attr|ref|exc):`~?([^`]+)`")


def _literal(text: str | None) -> str | None:
    """reStructuredText's ````x```` and ``:mod:`x``` as ```x```, and each paragraph on one
    line (a docstring's line breaks fit its source, not the terminal: the help wraps it)."""
    if not text:
        return text
    text = _ROLE.sub(r"`\1`", text.replace("``", "`"))
    paragraphs = text.split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def tidy_command(command: Any, path: str) -> None:
    """Rewrite the help of ``command`` (and of its sub-commands) as the module says."""
    command.help = _literal(command.help)
    command.short_help = _literal(command.short_help)
    example = example_of(path)
    if example and not command.epilog:
        command.epilog = f"Example: {example}"
    helper = command.get_help_option(Context(command))
    for param in [*command.params, *([helper] if helper is not None else [])]:
        param.help = _literal(getattr(param, "help", None))
        if isinstance(param, TyperOption) and not isinstance(param, _Option):
            if not param.is_flag and param.metavar is None:
                param.metavar = _metavar(param)
            param.__class__ = _Option
        elif isinstance(param, TyperArgument) and not isinstance(param, _Argument):
            if param.metavar is None:
                param.metavar = (param.name or "value").upper()
            param.__class__ = _Argument
    for name, sub in (getattr(command, "commands", None) or {}).items():
        tidy_command(sub, f"{path} {name}".strip())


class HelpGroup(TyperGroup):
    """The root group: tidies every command's help once the tree is built."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tidy_command(self, "")

    def format_help(self, ctx: Any, formatter: Any) -> None:
        # typer adds --install-completion and --show-completion after the group is built
        tidy_command(self, "")
        super().format_help(ctx, formatter)
