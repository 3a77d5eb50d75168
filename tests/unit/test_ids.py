"""One id minter: event ids, request ids and the random tails of client, inbox and worker
names all come from hookbus.bus.ids, with the forms the wire and the keys expect."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from hookbus.bus import ids

PACKAGE = Path(__file__).resolve().parents[2] / "hookbus"


def test_the_forms() -> None:
    event = ids.new_id()
    assert re.fullmatch(r"[0-9a-f]{28}", event)
    assert abs(int(event[:12], 16) - ids.now_ms()) < 60_000  # time-sortable: its ms first
    request = ids.new_request_id()
    assert uuid.UUID(hex=request).version == 4
    for n in (1, 4, 6, 16, 32):
        assert re.fullmatch(f"[0-9a-f]{{{n}}}", ids.token(n))
    assert len({ids.new_id() for _ in range(1000)}) == 1000
    assert len({ids.new_request_id() for _ in range(1000)}) == 1000


def test_no_other_module_mints_ids() -> None:
    minting = re.compile(r"\buuid\.uuid4\(|\bos\.urandom\(|^import uuid|^from uuid ")
    found = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in PACKAGE.rglob("*.py")
        if path.name != "ids.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if minting.search(line)
    ]
    assert found == []
