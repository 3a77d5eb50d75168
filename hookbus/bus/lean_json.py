"""JSON for processes that start per event, on the C codec without the ``json`` package.

``import json`` loads ``json.decoder``, which imports and compiles ``re`` (with ``enum``):
about 4 ms of every agent-CLI hook process, a quarter of its budget. The codec itself is
the C module ``_json``, which needs none of that; this module drives it as ``json.loads``
and ``json.dumps`` (default separators, ASCII output, NaN allowed) do, and falls back to
the ``json`` package where ``_json`` is missing (not CPython). A malformed document raises
``json.JSONDecodeError`` (a ValueError), as ``json.loads`` does, on the error path only
(where 3.11's ``_json`` finds no ``json.decoder`` loaded, the ``json`` package parses again).
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the per-event path does not import typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_WHITESPACE = " \t\n\r"
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Context:
    """What ``_json.make_scanner`` reads off a ``json.JSONDecoder``."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_CONSTANTS.__getitem__)
    memo: dict[str, str] = {}  # noqa: RUF012 - the C scanner keeps its own


def _default(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_scan: Callable[[str, int], tuple[Any, int]] | None
try:
    from _json import encode_basestring_ascii, make_encoder, make_scanner
except ImportError:  # pragma: no cover - an interpreter without the C codec
    _scan = None
else:
    _scan = make_scanner(_Context())  # type: ignore[arg-type]


def loads(text: str | bytes | bytearray) -> Any:
    """A JSON document (UTF-8 when bytes) as Python values, like ``json.loads``."""
    if isinstance(text, bytes | bytearray):
        text = text.decode("utf-8")
    if _scan is None or text.startswith("\ufeff"):
        import json  # pragma: no cover - the package's own message for the odd cases

        return json.loads(text)
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _scan(text, start)
    except StopIteration as exc:
        _fail("Expecting value", text, exc.value)
    except SystemError:
        # CPython 3.11's scanner looks JSONDecodeError up in sys.modules only, and fails
        # this way on a malformed document when json.decoder was never imported
        import json

        return json.loads(text)
    rest = text[end:]
    if rest.strip(_WHITESPACE):
        _fail("Extra data", text, end + len(rest) - len(rest.lstrip(_WHITESPACE)))
    return value


def _fail(message: str, text: str, at: int) -> Any:
    from json import JSONDecodeError  # the error path only

    raise JSONDecodeError(message, text, at)


def dumps(value: object) -> str:
    """``json.dumps(value)``: ASCII only, default separators."""
    if _scan is None:  # pragma: no cover - an interpreter without the C codec
        import json

        return json.dumps(value)
    # a fresh encoder per document, as json.dumps makes one: its circular-reference
    # markers must not outlive a failed call
    encode = make_encoder(
        {}, _default, encode_basestring_ascii, None, ": ", ", ", False, False, True
    )
    return "".join(encode(value, 0))
