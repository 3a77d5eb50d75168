"""Render ``deploy/grafana/hookbus.json`` to a PNG from a real fleet's metrics.

Grafana is not packaged for this machine, so this script does what it would: it starts a
redis-server, a chain, a fan-out and an RQ worker (each with ``--metrics-port``), a real
Prometheus (Debian's ``prometheus`` binary) scraping them every second, drives agents
through the fleet for ``--duration`` seconds (allowed and denied tool calls, a shadow hook,
telemetry events), then asks Prometheus for every panel's PromQL over the run
(``/api/v1/query_range``) and draws the panels in the dashboard's grid with matplotlib.

    python benchmarks/dashboard_png.py --duration 60 --out /tmp/hookbus-dashboard.png

Needs: ``redis-server`` and ``prometheus`` on PATH, matplotlib (the ``soak`` extra).
Everything it starts listens on 127.0.0.1 and is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "deploy" / "grafana" / "hookbus.json"

SHADOW_HOOK = """\
name = "trial-no-curl"
description = "Trial guard: would deny curl (shadow: recorded, never applied)"
events = ["PreToolUse"]
priority = 30
mode = "shadow"

[action.python]
entrypoint = "trial:check"
timeout_secs = 1
"""
SHADOW_CODE = """\
def check(event):
    command = str(event.payload.get("tool_input", {}).get("command", ""))
    if command.startswith("curl"):
        return {"outcome": "deny", "reason": "no network tools"}
    return None
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout_s: float = 20.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on port {port} after {timeout_s} s")


def start(stack: ExitStack, args: list[str], env: dict[str, str], log: Path) -> None:
    out = log.open("wb")
    stack.callback(out.close)
    proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)

    def stop() -> None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()

    stack.callback(stop)


def hooks_folder(tmp: Path) -> Path:
    folder = tmp / "hooks"
    shutil.copytree(ROOT / "examples" / "hooks", folder)
    (folder / "trial-no-curl").mkdir()
    (folder / "trial-no-curl" / "HOOK.toml").write_text(SHADOW_HOOK)
    (folder / "trial-no-curl" / "trial.py").write_text(SHADOW_CODE)
    return folder


def drive(url: str, duration_s: float) -> dict[str, int]:
    """Three agents: safe and destructive commands, curls the shadow hook would deny."""
    from hookbus import HookBus

    commands = ["ls -la", "pytest -q", "rm -rf /", "curl https://example.org", "cat README.md"]
    counts: dict[str, int] = {}
    bus = HookBus.from_url(url, "dash")
    sessions = [bus.session(f"agent-{n}", f"s-{n}") for n in range(3)]
    end = time.monotonic() + duration_s
    i = 0
    while time.monotonic() < end:
        session = sessions[i % 3]
        command = commands[i % len(commands)]
        decision = session.before_tool("Bash", {"command": command})
        counts[decision.outcome] = counts.get(decision.outcome, 0) + 1
        if decision.outcome == "allow":
            session.after_tool("Bash", {"command": command}, "ok", duration_ms=5)
        i += 1
        time.sleep(0.01 if (i // 300) % 2 == 0 else 0.03)  # load that varies over the run
    bus.close()
    return counts


def query_range(prom: int, expr: str, start: float, end: float) -> list[dict[str, Any]]:
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": "2s"})
    with urllib.request.urlopen(f"http://127.0.0.1:{prom}/api/v1/query_range?{params}") as r:
        body = json.loads(r.read())
    return list(body["data"]["result"])


def legend(fmt: str, labels: dict[str, str]) -> str:
    text = fmt
    for key, value in labels.items():
        text = text.replace("{{" + key + "}}", value)
    return text


def render(prom: int, start: float, end: float, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]
    rows = max(p["gridPos"]["y"] // 8 for p in panels) + 1
    fig = plt.figure(figsize=(16, 3.2 * rows))
    fig.suptitle(f"{dashboard['title']} (rendered from {DASHBOARD.name}, live Prometheus)")
    grid = fig.add_gridspec(rows, 24)
    for panel in panels:
        pos = panel["gridPos"]
        ax = fig.add_subplot(grid[pos["y"] // 8, pos["x"] : pos["x"] + pos["w"]])
        ax.set_title(panel["title"], fontsize=9)
        drawn = 0
        for target in panel["targets"]:
            for series in query_range(prom, target["expr"], start, end):
                xs = [float(v[0]) - start for v in series["values"]]
                ys = [float(v[1]) for v in series["values"]]
                name = legend(target.get("legendFormat", ""), series["metric"])
                ax.plot(xs, ys, label=name[:40], linewidth=1)
                drawn += 1
        if drawn:
            ax.legend(fontsize=6, loc="upper left")
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.tick_params(labelsize=7)
        ax.set_xlabel(f"s ({panel['fieldConfig']['defaults'].get('unit', '')})", fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of traffic")
    parser.add_argument("--out", type=Path, default=Path("hookbus-dashboard.png"))
    args = parser.parse_args()
    for binary in ("redis-server", "prometheus"):
        if shutil.which(binary) is None:
            raise SystemExit(f"{binary} is not on PATH (apt-get install {binary.split('-')[0]})")
    with tempfile.TemporaryDirectory(prefix="hookbus-dash-") as tmp_name, ExitStack() as stack:
        tmp = Path(tmp_name)
        redis_port, prom_port = free_port(), free_port()
        ports = {role: free_port() for role in ("chain", "fanout", "rq")}
        start(
            stack,
            ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", ""],
            dict(os.environ),
            tmp / "redis.log",
        )
        wait_port(redis_port)
        url = f"redis://127.0.0.1:{redis_port}/0"
        env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKBUS_")}
        env.update(HOOKBUS_REDIS_URL=url, HOOKBUS_NAMESPACE="dash")
        folder = hooks_folder(tmp)
        subprocess.run(
            [sys.executable, "-m", "hookbus", "reload", "--hooks-dir", str(folder)],
            env=env,
            check=True,
            capture_output=True,
        )
        for role, port in ports.items():
            start(
                stack,
                [
                    sys.executable,
                    "-m",
                    "hookbus",
                    "worker",
                    "--role",
                    role,
                    "--hooks-dir",
                    str(folder),
                    "--metrics-port",
                    str(port),
                ],
                env,
                tmp / f"{role}.log",
            )
        for port in ports.values():
            wait_port(port)
        config = tmp / "prometheus.yml"
        targets = ", ".join(f"'127.0.0.1:{p}'" for p in ports.values())
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"scrape_configs: [{{job_name: hookbus, static_configs: [{{targets: [{targets}]}}]}}]\n"
        )
        start(
            stack,
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            dict(os.environ),
            tmp / "prometheus.log",
        )
        wait_port(prom_port)
        began = time.time()
        counts = drive(url, args.duration)
        time.sleep(3)  # the last scrapes
        render(prom_port, began, time.time(), args.out)
        print(f"decisions: {counts}; dashboard written to {args.out}")


if __name__ == "__main__":
    main()
