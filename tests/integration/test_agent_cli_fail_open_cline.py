"""What Cline does with each way a PreToolUse hook file can answer: the facts behind
:mod:`hookbus.harnesses.cline_adapter`, its installer's fallback line and the Cline table
in ``docs/agent-clis.md``.

A stand-in hook file (no hookbus) answers the shell call ``touch ran.txt`` in one way; the
test checks whether the call ran and how the task ended. When a new Cline version changes
one of these, this test says which (its 120 s timeout is not waited for here). And every
built-in tool the adapter refuses with a ``null`` input is asked for once: each must reject
it before doing anything. Skipped,
saying why, where npm or the registry cannot be reached.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hookbus.harnesses.cline_adapter import NULL_REFUSED, SHELL_TOOL
from tests.integration import agent_clis
from tests.integration.fake_openai_chat import FakeChatModel, serve

pytestmark = [pytest.mark.slow, pytest.mark.agent_cli]

ECHO = json.dumps({"overrideInput": {"commands": ["echo refused"]}, "contextModification": "no"})
CANCEL = json.dumps({"cancel": True, "errorMessage": "no"})
#: the hook file's shell body (after reading stdin) -> (the call ran?, finishReason)
CASES: dict[str, tuple[str, bool, str]] = {
    "overrideInput, exit 0": (f"echo '{ECHO}'", False, "completed"),
    "overrideInput null (run_commands rejects it)": (
        """echo '{"overrideInput": null}'""",
        False,
        "completed",
    ),
    "cancel": (f"echo '{CANCEL}'", False, "aborted"),
    "exit 2, a reason on stderr": ("echo no >&2; exit 2", True, "completed"),
    "the overrideInput with exit 1": (f"echo '{ECHO}'; exit 1", False, "completed"),
    "stdout that is not JSON": ("echo garbage", True, "completed"),
    "half a JSON, then the HOOK_CONTROL line": (
        f"printf '{{\"overrideInput\": '; printf '\\nHOOK_CONTROL\\t%s\\n' '{CANCEL}'",
        False,
        "aborted",
    ),
    "half a JSON, HOOK_CONTROL on the same line": (
        f"printf '{{\"overrideInput\": '; printf 'HOOK_CONTROL\\t%s\\n' '{CANCEL}'",
        True,
        "completed",
    ),
    "a hook that cannot start (missing interpreter)": ("", True, "completed"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_what_cline_does_with_each_answer_of_a_pre_tool_use_hook(
    case: str, cline_bin: Path, tmp_path: Path
) -> None:
    body, should_run, finish = CASES[case]
    home, project = tmp_path / "home", tmp_path / "project"
    hooks = home / ".cline" / "hooks"
    hooks.mkdir(parents=True)
    project.mkdir()
    shebang = "#!/nonexistent/sh" if not body else "#!/bin/sh"
    (hooks / "PreToolUse").write_text(f"{shebang}\ncat >/dev/null\n{body}\n")
    model = FakeChatModel(["touch ran.txt"])
    with serve(model) as url:
        done = agent_clis.run_cline(cline_bin, base_url=url, home=home, project=project, env={})
    assert done.returncode == 0, done.stderr[-2000:]
    ran = (project / "ran.txt").exists()
    assert (ran, agent_clis.run_result(done).get("finishReason")) == (should_run, finish)


NULL_HOOK = """#!/usr/bin/env python3
import json, sys
call = json.load(sys.stdin)["tool_call"]
if call["name"] != "run_commands":
    print(json.dumps({"overrideInput": None}))
"""


def test_every_tool_hookbus_refuses_with_a_null_input_rejects_it_before_running(
    cline_bin: Path, tmp_path: Path
) -> None:
    # each refused call is followed by a harmless one: three failed calls in a row end a task
    tools = sorted(NULL_REFUSED - {SHELL_TOOL})
    steps: list[str | tuple[str, dict[str, Any]]] = []
    for tool in tools:
        steps += [(tool, {}), "echo reset"]
    home, project = tmp_path / "home", tmp_path / "project"
    hooks = home / ".cline" / "hooks"
    hooks.mkdir(parents=True)
    project.mkdir()
    (hooks / "PreToolUse").write_text(NULL_HOOK)
    model = FakeChatModel(steps, one_task=True)
    with serve(model) as url:
        done = agent_clis.run_cline(cline_bin, base_url=url, home=home, project=project, env={})
    assert agent_clis.run_result(done).get("finishReason") == "completed", done.stdout[-2000:]
    results = model.result_texts()
    refused = dict(zip(tools, results[::2], strict=True))
    assert {t: r for t, r in refused.items() if not r.startswith('{"error":')} == {}
