"""The per-event hook's JSON (hookbus.bus.lean_json) reads and writes exactly what the json
package does, without importing it (or ``re``)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookbus.bus import lean_json

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@given(JSON_VALUES)
def test_dumps_is_json_dumps(value: Any) -> None:
    assert lean_json.dumps(value) == json.dumps(value)


@given(JSON_VALUES, st.sampled_from(["", " ", "\n", " \r\n\t"]))
def test_loads_is_json_loads(value: Any, space: str) -> None:
    text = space + json.dumps(value, ensure_ascii=False) + space
    assert lean_json.loads(text) == json.loads(text)
    assert lean_json.loads(text.encode()) == json.loads(text.encode())


def test_nan_and_infinity_read_as_json_reads_them() -> None:
    assert math.isnan(lean_json.loads("NaN"))
    assert lean_json.loads("[-Infinity, Infinity]") == [float("-inf"), float("inf")]


@pytest.mark.parametrize("text", ["", "   ", "{", '{"a": 1} x', "[1,]", '"\\x"', "{'a': 1}"])
def test_malformed_documents_raise_what_json_raises(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as ours:
        lean_json.loads(text)
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(text)
    assert (ours.value.msg, ours.value.pos) == (theirs.value.msg, theirs.value.pos)


def test_what_json_cannot_encode_is_a_type_error_and_the_next_call_still_works() -> None:
    shared = {"k": 1}
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        lean_json.dumps({"a": shared, "b": {1, 2}})
    assert lean_json.dumps([shared, shared]) == '[{"k": 1}, {"k": 1}]'


def test_importing_it_loads_neither_json_nor_re() -> None:
    code = (
        "import sys\n"
        "from hookbus.bus import lean_json\n"
        "lean_json.dumps(lean_json.loads('{\"a\": [1, 2.5, null]}'))\n"
        "print(sorted(m for m in ('json', 're', 'enum', 'typing') if m in sys.modules))\n"
    )
    # -S: no site (an editable install's import finder loads re itself); the tree on the path
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("text", ['{"hookName": "tool_call"', '{"a": [1, 2', '{"a" 1}'])
def test_a_malformed_document_is_a_decode_error_where_json_was_never_imported(text: str) -> None:
    # CPython 3.11's _json finds JSONDecodeError in sys.modules only: before the fix its
    # scanner raised SystemError for these when nothing had imported json yet
    code = (
        "import sys\n"
        "from hookbus.bus import lean_json\n"
        "try:\n"
        f"    lean_json.loads({text!r})\n"
        "except ValueError as exc:\n"
        "    print(type(exc).__name__, exc.pos)\n"
    )
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env
    )
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(text)
    assert out.stdout.strip() == f"JSONDecodeError {theirs.value.pos}", out.stderr
