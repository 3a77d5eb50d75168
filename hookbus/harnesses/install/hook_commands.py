"""The command lines the Gemini CLI and Codex installers write.

Both CLIs run command hooks only, through the shell, and let a tool run when a hook exits
with anything they do not read as a deny (exit 1, a timeout, a command that is missing).
So:

* a guard's command ends with ``|| printf '%s\\n' '<deny JSON>'``: whenever hookbus (or the
  gateway call) did not exit 0, the shell prints the CLI's own deny form instead;
* in ``http`` mode the command is a small ``curl`` to the gateway (``POST
  /v1/hooks/<cli>?timeout=N``, the event JSON on stdin); ``--fail`` turns an HTTP error into
  a non-zero exit, so a guard falls back to the deny, and any other event to ``true``
  (it passes, as every non-guard event does when the bus cannot answer).

:func:`calls_hookbus` recognises both forms, so ``uninstall`` removes exactly them.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from typing import Any

from hookbus.harnesses.adapters import Adapter, Answer, Route
from hookbus.harnesses.install import settings_file
from hookbus.harnesses.install.table import InstallError

#: Path prefix of the gateway's hook endpoints.
GATEWAY_PATH = "/v1/hooks/"
#: Default gateway address for ``--mode http``.
DEFAULT_GATEWAY_URL = "http://127.0.0.1:8787"
#: Timeout of an entry whose request a hook may park for an operator (``[approval]``), in
#: seconds: above the longest ``approvals.wait_s`` (600 s), so the CLI does not give up first.
#: The command's own deadline stays the configured one; only a parked request waits longer.
PARKED_TIMEOUT_S = 610


def parkable(kind: str, mode: str) -> bool:
    """Whether a request of ``kind`` may be parked for an operator: a blocking request whose
    hooks may answer ``ask``."""
    from hookbus.bus.kinds import DEFAULT_CATALOGUE
    from hookbus.harnesses.adapters import REQUEST

    spec = DEFAULT_CATALOGUE.get(kind)
    return mode == REQUEST and spec is not None and "ask" in spec.verdicts


def entry_timeout(route: Route, timeout_s: int) -> int:
    """The timeout of ``route``'s entry: ``timeout_s``, or :data:`PARKED_TIMEOUT_S` when its
    request may be parked for an operator."""
    if parkable(route.kind, route.mode):
        return PARKED_TIMEOUT_S
    return timeout_s


def unavailable_output(adapter: Adapter, route: Route) -> dict[str, Any]:
    """What ``adapter`` prints for ``route`` when hookbus cannot answer (a guard's deny)."""
    output = adapter.render(route, Answer(unavailable=f"hookbus {adapter.name} hook could not run"))
    return dict(output.stdout or {})


def shell_entry(
    route: Route,
    timeout_s: int,
    *,
    cli: str,
    mode: str,
    command: str,
    url: str,
    down: Callable[[Route], Mapping[str, Any]],
) -> tuple[str, int]:
    """The command line of ``route``'s entry and its timeout (:func:`entry_timeout` of
    ``timeout_s``). The line is ``<command> <cli> hook``, or in ``http`` mode a ``curl`` to
    the gateway at ``url`` (default :data:`DEFAULT_GATEWAY_URL`); a guard's prints
    ``down(route)``, the CLI's deny, when it did not exit 0, and in ``http`` mode any other
    event's passes when the gateway call failed."""
    timeout = entry_timeout(route, timeout_s)
    if mode == "http":
        line = gateway_command(url or DEFAULT_GATEWAY_URL, cli, timeout)
    else:
        line = hook_command(command, cli, timeout)
    if route.guard:
        return fail_closed(line, down(route)), timeout
    if mode == "http":
        return passes_on_failure(line), timeout
    return line, timeout


def fail_closed(command: str, body: Mapping[str, Any]) -> str:
    """``command`` followed by a shell fallback that prints ``body`` when it did not exit 0."""
    return f"{command} || printf '%s\\n' {shlex.quote(json.dumps(body))}"


def hook_command(hookbus: str, cli: str, timeout_s: int) -> str:
    """``<hookbus> <cli> hook --timeout N``: the per-event lean command."""
    return f"{hookbus} {cli} hook --timeout {timeout_s}"


def gateway_endpoint(url: str, cli: str) -> str:
    """The gateway's endpoint of ``cli`` from ``--url``: its base URL (``http://h:8787``) or
    the endpoint itself (``.../v1/hooks/<cli>``), either with a trailing slash or a query;
    never the path twice. InstallError when the URL names another CLI's endpoint."""
    base = url.partition("?")[0].partition("#")[0].rstrip("/")
    prefix = GATEWAY_PATH.rstrip("/")
    if base.endswith(prefix):
        return f"{base}/{cli}"
    head, _, last = base.rpartition("/")
    if head.endswith(prefix):
        if last != cli:
            raise InstallError(
                "--url",
                f"{url} names {prefix}/{last}, the gateway path of another CLI; give the "
                f"gateway's base URL or its {prefix}/{cli}",
            )
        return base
    return f"{base}{GATEWAY_PATH}{cli}"


def gateway_command(url: str, cli: str, timeout_s: int) -> str:
    """A ``curl`` that posts the event on stdin to the gateway and prints its answer; it
    gives up half a second before the entry's timeout, so the fallback still runs."""
    endpoint = f"{gateway_endpoint(url, cli)}?timeout={timeout_s}"
    return (
        f"curl --silent --show-error --fail --max-time {max(timeout_s - 0.5, 0.5):g} "
        "-H 'Content-Type: application/json' --data-binary @- "
        f"{shlex.quote(endpoint)}"
    )


def passes_on_failure(command: str) -> str:
    """A non-guard event: a failed gateway call passes quietly (exit 0, no output)."""
    return f"{command} || true"


def calls_hookbus(command: str, cli: str) -> bool:
    """Whether a command line is one of ours for ``cli``: ``<hookbus> <cli> hook`` or a
    ``curl`` to the gateway's ``/v1/hooks/<cli>``."""
    if settings_file.command_calls(command, cli):
        return True
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    if not argv or argv[0] != "curl":
        return False
    return any(
        arg.partition("?")[0].rstrip("/").endswith(f"{GATEWAY_PATH}{cli}") for arg in argv[1:]
    )


def entry_calls_hookbus(entry: Mapping[str, Any], key: str, cli: str) -> bool:
    """Whether a hook entry's command line (its field ``key``) is one of ours for ``cli``."""
    command = entry.get(key)
    return isinstance(command, str) and calls_hookbus(command, cli)
