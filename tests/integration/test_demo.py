"""`hookbus demo` plays its three agents on an embedded fleet and says what happened."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


@pytest.mark.integration
@pytest.mark.slow
def test_the_demo_denies_the_rm_rf_rewrites_the_edit_routes_the_prompt_and_records_telemetry() -> (
    None
):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    # A configured Redis must not be used: the demo always runs its own embedded server.
    env["HOOKBUS_REDIS_URL"] = "redis://127.0.0.1:1"
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", "demo", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    steps, summary = lines[:-1], lines[-1]
    by_what = {(s["agent"], s["what"]): s for s in steps}

    denied = by_what[("agent-beta", "Bash rm -rf /")]
    assert denied["outcome"] == "deny"
    assert "deletes everything" in denied["detail"]
    assert by_what[("agent-beta", "Bash rm -rf build/")]["outcome"] == "allow"
    edit = by_what[("agent-gamma", "Edit ./src//app.py")]
    assert (edit["outcome"], edit["detail"]) == ("allow", "rewrote file_path -> src/app.py")
    prompt = by_what[("agent-alpha", "Please refactor the billing module and run the tests")]
    assert "routing_hint=refactor_code" in prompt["detail"]
    assert not any(s["degraded"] for s in steps)
    allowed_tools = sum(1 for s in steps if s["kind"] == "PreToolUse" and s["outcome"] == "allow")
    assert summary["telemetry_lines"] == allowed_tools == 3
    assert sum(1 for s in steps if s["kind"] == "SessionEnd") == 3
