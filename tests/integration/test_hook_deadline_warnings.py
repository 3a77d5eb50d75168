"""Issue 12 row 14: a blocking hook whose timeout outlasts the deadline of the kind it serves
is warned about by ``hookbus hooks validate``, ``hookbus hooks list`` and ``hookbus reload``
(a warning, not a refusal: the folder still validates and pushes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from hookbus.cli.fleet import reload as reload_cli
from hookbus.cli.hooks import manage as hooks_cli

pytestmark = pytest.mark.integration

app = typer.Typer()
app.add_typer(hooks_cli.app, name="hooks")
app.command("reload")(reload_cli.reload)


def _python_hook(root: Path, name: str, events: str, extra: str = "") -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / f"{name}_mod.py").write_text("def check(event):\n    return None\n")
    (folder / "HOOK.toml").write_text(
        f'name = "{name}"\nevents = [{events}]\n{extra}'
        f'[action.python]\nentrypoint = "{name}_mod:check"\n'
    )


@pytest.fixture
def hooks(tmp_path: Path) -> Path:
    root = tmp_path / "hooks"
    # the default timeout (10 s) on PreToolUse, whose requests wait 250 ms by default
    _python_hook(root, "slowguard", '"PreToolUse"')
    # within the deadline: no warning
    _python_hook(root, "quickguard", '"PreToolUse"')
    (root / "quickguard" / "HOOK.toml").write_text(
        (root / "quickguard" / "HOOK.toml").read_text() + "timeout_secs = 0.2\n"
    )
    # never blocks: its timeout holds up nobody
    _python_hook(root, "observer", '"PostToolUse"', "blocking = false\n")
    return root


@pytest.fixture
def cli(real_redis_url: str, namespace: str) -> Any:
    runner = CliRunner()
    env = {"HOOKBUS_REDIS_URL": real_redis_url, "HOOKBUS_NAMESPACE": namespace}

    def invoke(*args: str) -> Any:
        return runner.invoke(app, list(args), env=env, catch_exceptions=False)

    return invoke


def _warned(data: dict[str, Any]) -> list[str]:
    return [w["hook"] for w in data.get("warnings", [])]


def test_a_blocking_hook_slower_than_its_kind_s_deadline_is_warned_about(
    cli: Any, hooks: Path
) -> None:
    validated = cli("hooks", "validate", str(hooks), "--json")
    assert validated.exit_code == 0, validated.output  # a warning, not a problem
    data = json.loads(validated.stdout)
    assert data["ok"] is True
    assert _warned(data) == ["slowguard"]
    text = data["warnings"][0]["message"]
    assert "10 s" in text and "250 ms" in text and "PreToolUse" in text

    shown = cli("hooks", "validate", str(hooks))
    assert shown.exit_code == 0
    assert "warning" in shown.output and "slowguard" in shown.output

    listed = cli("hooks", "list", "--dir", str(hooks), "--json")
    assert _warned(json.loads(listed.stdout)) == ["slowguard"]
    assert "slowguard" in cli("hooks", "list", "--dir", str(hooks)).output.split("warning")[-1]

    pushed = cli("reload", "--dir", str(hooks), "--json")
    assert pushed.exit_code == 0, pushed.output
    assert _warned(json.loads(pushed.stdout)) == ["slowguard"]
    (hooks / "slowguard" / "HOOK.toml").write_text(
        (hooks / "slowguard" / "HOOK.toml").read_text() + "timeout_secs = 0.1\n"
    )
    again = cli("reload", "--dir", str(hooks))
    assert again.exit_code == 0, again.output
    assert "slowguard" not in again.output
