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

from tests.agent_cli_helpers import (
    SECRET,
    TOUCH,
    UNREACHABLE,
    after_tool_events,
    agent_env,
    cli_dirs,
    codex_run,
    gemini_run,
    install_cli,
    last_deny,
)
from tests.claude_code_helpers import free_gateway_port
from tests.integration import agent_clis

pytestmark = pytest.mark.slow


def _session(
    cli: str, bins: tuple[Path, Path], home: Path, project: Path, env: dict[str, str], command: str
) -> str:
    """What the model got back from one shell call ``command`` in a session of ``cli``."""
    if cli == "gemini-cli":
        return gemini_run(bins[0], home, project, env, command)[1]
    return codex_run(bins[1], home, project, env, command)[1]


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
    home, project = cli_dirs(tmp_path)
    if cli == "gemini-cli":
        agent_clis.gemini_settings(home)
    install_cli(cli, home, "--mode", "http", "--url", gateway)
    env = agent_env(UNREACHABLE, "not-used")  # only the gateway talks to Redis
    bins = (gemini_bin, codex_bin)

    text = _session(cli, bins, home, project, env, SECRET)
    reason = last_deny(real_redis, namespace)
    assert reason.startswith("refused: the call touches a secret file (deploy/prod.env)")
    assert reason in text

    text = _session(cli, bins, home, project, env, "echo hello-through-the-gateway")
    assert "hello-through-the-gateway" in text
    (after,) = after_tool_events(real_redis, namespace)
    assert after.payload["tool_input"]["command"] == "echo hello-through-the-gateway"
    assert after.meta["harness"] == cli


@pytest.mark.parametrize("cli", ["gemini-cli", "codex"])
def test_a_real_cli_blocks_a_guarded_call_with_the_gateway_down(
    cli: str, gemini_bin: Path, codex_bin: Path, tmp_path: Path
) -> None:
    home, project = cli_dirs(tmp_path)
    if cli == "gemini-cli":
        agent_clis.gemini_settings(home)
    install_cli(cli, home, "--mode", "http", "--url", f"http://127.0.0.1:{free_gateway_port()}")
    text = _session(cli, (gemini_bin, codex_bin), home, project, agent_env(UNREACHABLE, "x"), TOUCH)
    assert f"hookbus {cli} hook could not run" in text
    assert not (project / "ran.txt").exists()
