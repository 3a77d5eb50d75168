"""Every code block in the README, docs/ and the examples' READMEs is at least well formed.

Python compiles, TOML / JSON / YAML parse, and every shell command (a ``bash`` block, or the
``$ `` lines of a ``console`` block) passes ``bash -n``. The README's Python example also
runs end to end in tests/integration/test_readme.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "examples").rglob("README.md")),
]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks() -> list[tuple[str, str, str]]:
    found = []
    for path in DOCS:
        text = path.read_text()
        for match in FENCE.finditer(text):
            line = text[: match.start()].count("\n") + 1
            found.append((f"{path.relative_to(ROOT)}:{line}", match.group(1), match.group(2)))
    return found


def shell_of(lang: str, source: str) -> str | None:
    if lang in ("bash", "sh", "shell"):
        return source
    if lang == "console":
        return "\n".join(line[2:] for line in source.splitlines() if line.startswith("$ "))
    return None


@pytest.mark.parametrize(("where", "lang", "source"), blocks(), ids=lambda v: str(v)[:40])
def test_the_code_block_is_well_formed(where: str, lang: str, source: str) -> None:
    if lang == "python":
        compile(source, where, "exec")
    elif lang == "toml":
        tomllib.loads(source)
    elif lang == "json":
        json.loads(source)
    elif lang == "yaml":
        list(yaml.safe_load_all(source))
    script = shell_of(lang, source)
    if script:
        checked = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
        assert checked.returncode == 0, f"{where}: {checked.stderr}"


def test_there_are_blocks_to_check() -> None:
    langs = {lang for _, lang, _ in blocks()}
    assert {"python", "toml", "console"} <= langs
