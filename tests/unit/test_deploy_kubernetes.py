"""The Kubernetes manifests agree with the code: KEDA scales on the stream and group the
workers read (the lag they export as ``hookbus_stream_lag``), and every worker role serves
its metrics on the port Prometheus is told to scrape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from hookbus.bus import keys

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"


def documents() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        found.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return found


def of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in documents() if d["kind"] == kind}


def test_the_chain_workers_scale_on_the_request_stream_lag_of_the_chain_group() -> None:
    (trigger,) = of_kind("ScaledObject")["hookbus-chain"]["spec"]["triggers"]
    assert trigger["type"] == "redis-streams"
    meta = trigger["metadata"]
    assert meta["stream"] == keys.requests("default")
    assert meta["consumerGroup"] == keys.CHAIN_GROUP
    assert "lagCount" in meta  # XINFO GROUPS lag: what hookbus_stream_lag reports
    assert trigger["authenticationRef"]["name"] in of_kind("TriggerAuthentication")


def test_the_rq_workers_scale_on_their_queue() -> None:
    (trigger,) = of_kind("ScaledObject")["hookbus-rq"]["spec"]["triggers"]
    assert trigger["metadata"]["listName"] == "rq:queue:" + keys.rq_queue_name("default")
    assert trigger["authenticationRef"]["name"] in of_kind("TriggerAuthentication")


def test_every_worker_role_serves_metrics_where_prometheus_scrapes() -> None:
    deployments = of_kind("Deployment")
    roles = set()
    for deployment in deployments.values():
        pod = deployment["spec"]["template"]
        (container,) = pod["spec"]["containers"]
        args = container["args"]
        roles.add(args[args.index("--role") + 1])
        env = {e["name"]: e.get("value") for e in container["env"]}
        port = pod["metadata"]["annotations"]["prometheus.io/port"]
        assert env["HOOKBUS_METRICS_PORT"] == port
        assert {"name": "metrics", "containerPort": int(port)} in container["ports"]
        assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert roles == {"chain", "fanout", "rq"}
