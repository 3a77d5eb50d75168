"""The example judge hook loads as shipped and judges through a model server."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hookbus.bus.wire import Event
from hookbus.hooks.loader import load_hooks
from hookbus.hooks.registry import HookRegistry
from tests.judge_helpers import fake_judge, verdict

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "judge"
SHIPPED_ENDPOINT = 'endpoint = "http://127.0.0.1:8000/v1"'


def test_the_production_judge_loads_and_denies_what_the_model_denies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKBUS_LLM_API_KEY", "sk-local")
    assert [h.name for h in load_hooks(EXAMPLE).hooks] == ["production-judge"]
    shutil.copytree(EXAMPLE, tmp_path / "judge")
    manifest = tmp_path / "judge" / "production-judge" / "HOOK.toml"
    with fake_judge(lambda _: verdict("deny", "it deletes the production bucket")) as judge:
        text = manifest.read_text()
        assert SHIPPED_ENDPOINT in text
        manifest.write_text(text.replace(SHIPPED_ENDPOINT, f'endpoint = "{judge.endpoint}"'))
        hooks = HookRegistry()
        assert hooks.replace_dynamic(load_hooks(tmp_path / "judge").hooks) == []
        event = Event(
            kind="PreToolUse",
            payload={"tool_name": "Bash", "tool_input": {"command": "aws s3 rb s3://prod"}},
        )
        decision = hooks.run(event)
    assert (decision.outcome, decision.reason) == ("deny", "it deletes the production bucket")
    assert judge.calls[0]["messages"][1]["content"] == '{"input": "aws s3 rb s3://prod"}'
    assert judge.headers[0]["authorization"] == "Bearer sk-local"
