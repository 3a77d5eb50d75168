"""Run a Markdown ``console`` block exactly as written, in one bash, and compare what each
``$ `` command prints with the lines the block shows under it (timings and ids are
wildcards; a ``...`` line ends the comparison of that command's output)."""

from __future__ import annotations

import re
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

#: Words that vary from run to run: a duration, an event id, a stream entry id.
_VARYING = [
    (re.compile(r"\b\d+(\.\d+)? ms\b"), "<N> ms"),
    (re.compile(r"\b[0-9a-f]{28}\b"), "<ID>"),
    (re.compile(r"\b\d{13}-\d+\b"), "<ENTRY>"),
]
_FENCE = re.compile(r"^```console\n(.*?)^```", re.S | re.M)


@dataclass
class Step:
    """One ``$`` command of a block, what the doc shows under it, and what it printed."""

    command: str
    shown: list[str]
    printed: list[str]
    code: int

    def mismatch(self) -> str | None:
        """None when the output agrees with the doc, else both, for the failure message."""
        if self.code in (64, 126, 127):  # usage error, not executable, not found
            return f"`{self.command}` exited {self.code}: {self.printed}"
        shown = [_normal(s) for s in self.shown]
        if "..." in shown:
            shown = shown[: shown.index("...")]
        printed = [_normal(p) for p in self.printed][: len(shown)]
        if shown and printed != shown:
            return f"`{self.command}`\n  doc:  {shown}\n  real: {printed}"
        return None


def _normal(line: str) -> str:
    line = line.rstrip()
    for pattern, word in _VARYING:
        line = pattern.sub(word, line)
    return line


def console_blocks(text: str) -> list[str]:
    return [m.group(1) for m in _FENCE.finditer(text)]


def steps_of(block: str) -> list[tuple[str, list[str]]]:
    """(command, shown output) of each ``$`` line of a console block."""
    steps: list[tuple[str, list[str]]] = []
    lines = block.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            i += 1
            continue
        command = line[2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1] + " " + lines[i].strip()
        shown = []
        i += 1
        while i < len(lines) and not lines[i].startswith("$ "):
            shown.append(lines[i])
            i += 1
        steps.append((command, shown))
    return steps


def run_block(block: str, *, cwd: Path, env: dict[str, str], timeout_s: float = 120) -> list[Step]:
    """Run every command of ``block`` in one bash (so ``echo $?`` sees the one before)."""
    steps = steps_of(block)
    mark = f"--step-{uuid.uuid4().hex}--"
    # after each command: its exit code behind the mark, then $? set back for `echo $?`
    script = "".join(
        f'{command}\n__rc=$?; echo "{mark}$__rc"; (exit $__rc)\n' for command, _ in steps
    )
    done = subprocess.run(
        ["bash", "-c", script + "true"],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout_s,
    )
    outputs = done.stdout.split(mark)
    results = []
    for n, (command, shown) in enumerate(steps):
        before = outputs[n] if n < len(outputs) else ""
        if n > 0:  # the previous step's exit code heads this chunk
            before = before.split("\n", 1)[1] if "\n" in before else ""
        after = outputs[n + 1] if n + 1 < len(outputs) else ""
        code = int(after.split("\n", 1)[0]) if after[:1].isdigit() else -1
        results.append(Step(command, shown, before.splitlines(), code))
    return results
