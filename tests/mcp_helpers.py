"""Helpers shared by ``test_security_mcp.py`` and the test modules that
need the same set-up (a test module never imports another)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client

GUARD = {
    "name": "no-rm",
    "description": "denies rm -rf",
    "events": ["PreToolUse"],
    "priority": 10,
    "match": {"tools": ["Bash"]},
    "script": (
        "import json, sys\n"
        "event = json.load(sys.stdin)\n"
        "command = event['payload'].get('tool_input', {}).get('command', '')\n"
        "if 'rm -rf' in command:\n"
        "    print(json.dumps({'outcome': 'deny', 'reason': 'no rm -rf please'}))\n"
    ),
    "language": "python",
}


@asynccontextmanager
async def mcp_session(hooks: Path, cwd: Path, **env: str) -> AsyncIterator[ClientSession]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    base.update(env)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hookbus", "mcp", "--dir", str(hooks)],
        env=base,
        cwd=str(cwd),
    )
    # the server's stderr (logs, bypass warnings) goes to a file next to the test's folder
    with (cwd / "mcp-stderr.log").open("a") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **args: Any) -> tuple[dict[str, Any], bool]:
    result = await session.call_tool(tool, args)
    text = result.content[0].text  # type: ignore[union-attr]
    data = json.loads(text)
    assert result.structured_content == data
    return data, bool(result.is_error)
