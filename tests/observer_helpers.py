"""Helpers of the request-observer tests: a guard, an observer that records what it saw
(each event once per run, with the decision it was shown) and a slow observer."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import redis

#: The handlers' module. The observer counts each event it sees in $OBSERVE_RECORD_KEY
#: (``kind|harness|event id`` -> runs) and keeps the decision it saw beside it.
HANDLERS = textwrap.dedent(
    """
    import json
    import os
    import time

    import redis

    _client = None


    def _redis():
        global _client
        if _client is None:
            _client = redis.Redis.from_url(os.environ["OBSERVE_RECORD_URL"])
        return _client


    def guard(event):
        command = str(event.payload.get("tool_input", {}).get("command", ""))
        if "rm -rf" in command:
            return {"outcome": "deny", "reason": "refused by the guard: rm -rf"}
        return None


    def observe(event):
        key = os.environ["OBSERVE_RECORD_KEY"]
        field = f"{event.kind}|{event.meta.get('harness', 'sdk')}|{event.id}"
        pipe = _redis().pipeline(transaction=False)
        pipe.hincrby(key, field, 1)
        pipe.hset(key + ":decision", field, json.dumps(event.meta.get("decision")))
        pipe.execute()


    def slow(event):
        time.sleep(2)
        _redis().hincrby(os.environ["OBSERVE_RECORD_KEY"] + ":slow", event.id, 1)
    """
)

#: Kinds the observer watches.
OBSERVED = ("PromptSubmit", "SessionStart", "Stop", "PreToolUse")


def write_hooks(root: Path) -> Path:
    """A hooks folder: ``guard`` (denies ``rm -rf``), ``observer`` (blocking = false on
    :data:`OBSERVED`), ``slow-observer`` (2 s, on PromptSubmit)."""
    specs = {
        "guard": ('["PreToolUse"]', "", "guard"),
        "observer": (json.dumps(list(OBSERVED)), "blocking = false\n", "observe"),
        "slow-observer": ('["PromptSubmit"]', "blocking = false\n", "slow"),
    }
    for name, (events, extra, entry) in specs.items():
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "handlers.py").write_text(HANDLERS)
        (folder / "HOOK.toml").write_text(
            f'name = "{name}"\nevents = {events}\n{extra}'
            f'[action.python]\nentrypoint = "handlers:{entry}"\ntimeout_secs = 5\n'
        )
    return root


def seen(client: redis.Redis, key: str) -> dict[str, int]:
    """What the observer saw: ``kind|harness|event id`` -> how many runs."""
    raw: dict[bytes, bytes] = client.hgetall(key)  # type: ignore[assignment]
    return {k.decode(): int(v) for k, v in raw.items()}


def decisions(client: redis.Redis, key: str) -> dict[str, dict[str, object] | None]:
    """The decision the observer was shown, per ``kind|harness|event id``."""
    raw: dict[bytes, bytes] = client.hgetall(key + ":decision")  # type: ignore[assignment]
    return {k.decode(): json.loads(v) for k, v in raw.items()}
