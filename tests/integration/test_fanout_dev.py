"""``hookbus publish`` against ``hookbus dev`` runs the shipped telemetry example."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.fanout_helpers import wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "hooks"
URL_LINE = re.compile(r"export HOOKBUS_REDIS_URL=(\S+)")


def test_publishing_a_tool_call_makes_the_example_telemetry_hook_write_its_line(
    tmp_path: Path,
) -> None:
    telemetry = tmp_path / "telemetry.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
    env.update({"COLUMNS": "200", "HOOKBUS_TELEMETRY_FILE": str(telemetry)})
    dev = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "dev", "--hooks-dir", str(EXAMPLES)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert dev.stdout is not None
        url = None
        for _ in range(50):  # the banner comes within a few lines
            line = dev.stdout.readline()
            match = URL_LINE.search(line)
            if match:
                url = match.group(1)
                break
        assert url, "hookbus dev printed no URL"
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "hookbus",
                "publish",
                "PostToolUse",
                "--payload",
                '{"tool_name":"Bash","duration_ms":12}',
                "--session",
                "s1",
            ],
            env={**env, "HOOKBUS_REDIS_URL": url},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.returncode == 0, out.stderr
        event_id = out.stdout.strip()
        wait_for(
            lambda: telemetry.exists() and telemetry.read_text().strip() != "",
            30,
            "the telemetry line",
        )
        [line] = [json.loads(x) for x in telemetry.read_text().splitlines()]
        assert line["event_id"] == event_id
        assert (line["tool_name"], line["duration_ms"], line["session_id"]) == ("Bash", 12, "s1")
    finally:
        dev.send_signal(signal.SIGINT)
        try:
            dev.wait(20)
        except subprocess.TimeoutExpired:
            dev.kill()
            dev.wait(5)
        if dev.stdout is not None:
            dev.stdout.close()
