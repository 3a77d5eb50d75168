"""A stand-in supervising agent: logs every wake it gets, and may answer it.

The wake hook runs it once per wake with the structured message on stdin::

    python supervisor_stub.py --session {openclaw_session_id} [--log-dir DIR]

Each wake is appended to ``<log-dir>/<session>.log`` (default ``~/.cache/hookbus-supervisors``:
the wake hook's scrubbed environment keeps ``HOME``) (one file per supervisor, so you can
see that a wake reached the right one and no other). With ``--answer TEXT`` it prints
``{"decision": "block", "reason": TEXT}``: in bidirectional mode the agent goes on with
TEXT as its next instruction; in async mode the answer is dropped. A real supervisor would
instead hand the message to its agent (``openclaw agent --session-id ...``) and drive the
session with ``hookbus tmux SESSION choose N`` / ``type TEXT``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--session", required=True, help="the supervisor's session id")
    parser.add_argument(
        "--log-dir",
        default=str(Path.home() / ".cache" / "hookbus-supervisors"),
        help="folder of the per-supervisor logs (default: ~/.cache/hookbus-supervisors)",
    )
    parser.add_argument("--answer", help="answer every wake with this instruction")
    parser.add_argument("--delay", type=float, default=0.0, help="think this long first (s)")
    parser.add_argument(
        "--delay-file", help="think as many seconds as this file says, when it exists"
    )
    args = parser.parse_args(argv)
    message = sys.stdin.read()
    log_dir = Path(args.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    with (log_dir / f"{args.session}.log").open("a", encoding="utf-8") as log:
        log.write(f"=== wake at {time.strftime('%H:%M:%S')} ===\n{message}\n")
    delay = args.delay
    if args.delay_file and Path(args.delay_file).exists():
        delay = float(Path(args.delay_file).read_text().strip() or 0)
    if delay:
        time.sleep(delay)
    if args.answer:
        print(json.dumps({"decision": "block", "reason": args.answer}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
