"""A worker's /metrics shows what its judge hooks cost: model calls, verdicts shared, failures
by cause, tokens and the median call, read from memory at scrape time."""

from __future__ import annotations

from pathlib import Path

from hookbus.bus.wire import Event
from hookbus.hooks.loader import load_hooks
from hookbus.hooks.registry import HookRegistry
from hookbus.workers.fleet.collector import JudgeCollector
from hookbus.workers.fleet.metrics import PrometheusMetrics
from tests.judge_helpers import Answer, fake_judge, verdict, write_judge_hook


def test_the_metrics_count_calls_shared_verdicts_failures_and_tokens(tmp_path: Path) -> None:
    answers = iter([verdict("deny", "production"), Answer(body=b"{}", status=503)])
    with fake_judge(lambda _: next(answers)) as judge:
        write_judge_hook(
            tmp_path, judge.endpoint, name="metered-judge", action_extra='cache_ttl = "1m"\n'
        )
        hooks = HookRegistry()
        hooks.replace_dynamic(load_hooks(tmp_path).hooks, version="v1")
        for command in ("drop prod", "drop prod", "ls"):
            payload = {"tool_name": "Bash", "tool_input": {"command": command}}
            hooks.run(Event(kind="PreToolUse", payload=payload), time_left_s=5)
    metrics = PrometheusMetrics("chain")
    metrics.add_collector(JudgeCollector())

    text = metrics.render().decode()

    assert 'hookbus_judge_calls_total{hook="metered-judge"} 1.0' in text
    assert 'hookbus_judge_shared_total{hook="metered-judge"} 1.0' in text
    assert 'hookbus_judge_failures_total{cause="http",hook="metered-judge"} 1.0' in text
    assert 'hookbus_judge_tokens_total{hook="metered-judge"} 62.0' in text
    assert 'hookbus_judge_call_median_seconds{hook="metered-judge"}' in text
