"""The real Gemini CLI and Codex reaching the fleet through the gateway (``install --mode
http``: each entry is a small ``curl`` to ``/v1/hooks/gemini-cli`` or ``/v1/hooks/codex``).

A guarded call is denied by the fleet through the gateway and the reason reaches the model;
a harmless one runs and its after-tool event reaches the event stream; with the gateway down
the guard's shell fallback still denies.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from tests.integration import agent_clis
from tests.integration.test_agent_cli_binaries import (
    SECRET,
    TOUCH,
    UNREACHABLE,
    _after_tool,
    _codex,
    _dirs,
    _env,
    _gemini,
    _install,
    _last_deny,
    chain_worker,
    codex_bin,
    gemini_bin,
)
from tests.integration.test_claude_code_binary import _free_port, gateway

pytestmark = pytest.mark.slow
__all__ = ["chain_worker", "codex_bin", "gateway", "gemini_bin"]


def _session(
    cli: str, bins: tuple[Path, Path], home: Path, project: Path, env: dict[str, str], command: str
) -> str:
    """What the model got back from one shell call ``command`` in a session of ``cli``."""
    if cli == "gemini-cli":
        return _gemini(bins[0], home, project, env, command)[1]
    return _codex(bins[1], home, project, env, command)[1]


@pytest.mark.parametrize("cli", ["gemini-cli", "codex"])
def test_a_real_cli_is_guarded_by_the_fleet_through_the_gateway(
    cli: str,
    gemini_bin: Path,
    codex_bin: Path,
    real_redis_url: str,
    real_redis: redis.Redis,
    namespace: str,
    chain_worker: None,
    gateway: str,
    tmp_path: Path,
) -> None:
    home, project = _dirs(tmp_path)
    if cli == "gemini-cli":
        agent_clis.gemini_settings(home)
    _install(cli, home, "--mode", "http", "--url", gateway)
    env = _env(UNREACHABLE, "not-used")  # only the gateway talks to Redis
    bins = (gemini_bin, codex_bin)

    text = _session(cli, bins, home, project, env, SECRET)
    reason = _last_deny(real_redis, namespace)
    assert reason.startswith("refused: the call touches a secret file (deploy/prod.env)")
    assert reason in text

    text = _session(cli, bins, home, project, env, "echo hello-through-the-gateway")
    assert "hello-through-the-gateway" in text
    (after,) = _after_tool(real_redis, namespace)
    assert after.payload["tool_input"]["command"] == "echo hello-through-the-gateway"
    assert after.meta["harness"] == cli


@pytest.mark.parametrize("cli", ["gemini-cli", "codex"])
def test_a_real_cli_blocks_a_guarded_call_with_the_gateway_down(
    cli: str, gemini_bin: Path, codex_bin: Path, tmp_path: Path
) -> None:
    home, project = _dirs(tmp_path)
    if cli == "gemini-cli":
        agent_clis.gemini_settings(home)
    _install(cli, home, "--mode", "http", "--url", f"http://127.0.0.1:{_free_port()}")
    text = _session(cli, (gemini_bin, codex_bin), home, project, _env(UNREACHABLE, "x"), TOUCH)
    assert f"hookbus {cli} hook could not run" in text
    assert not (project / "ran.txt").exists()
