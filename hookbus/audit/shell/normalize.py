"""Ordinary shell the parser (bashlex) cannot read, rewritten into shell it can, with the same
commands, words and line numbers.

bashlex has no ``case ... esac`` and refuses here-documents whose delimiter is quoted
(``<<'EOF'``). Refusing every hook that uses them would refuse ordinary hooks, so before
parsing:

* a here-document's quoted delimiter is unquoted (``<<'EOF'`` → ``<< EOF ``): the body is
  then read as if it were expanded, which can only find more, never less;
* plain counting (``n=$((n+1))`` over integers the script sets) becomes a number
  (:mod:`hookbus.audit.shell.bindings`);
* a ``case WORD in P1|P2) BODY ;; ... esac`` becomes ``: WORD ; : P1 P2 ; BODY ; ... :``:
  every pattern and the word stay arguments (a ``$(...)`` in a pattern, which bash runs,
  is still audited as the substitution it is) and every body stays a command list.

Anything this cannot follow (an unterminated quote, a ``case`` without ``in`` or ``esac``)
is left as it was, so the parser fails on it and the hook is refused as unreadable.
"""

from __future__ import annotations

import re

from hookbus.audit.shell.bindings import rewrite_arithmetic

_QUOTED_HEREDOC = re.compile(r"<<(-?)[ \t]*(['\"])([A-Za-z_][A-Za-z0-9_]*)\2")
_CASE = re.compile(r"(?m)(?:^|(?<=[;&|({!])|(?<=\bthen)|(?<=\bdo)|(?<=\belse))[ \t]*case(?=[ \t])")
_SPACE = " \t"
_BLANK = " \t\r\n"


class _Unreadable(Exception):
    """The text is not shell this rewriter can follow; it is left to the parser."""


def _skip_quoted(text: str, i: int) -> int:
    """Index just past the quoted string, substitution or escape starting at ``i``."""
    char = text[i]
    if char == "\\":
        return i + 2
    if char == "'":
        end = text.find("'", i + 1)
        if end < 0:
            raise _Unreadable
        return end + 1
    if char == '"':
        j = i + 1
        while j < len(text) and text[j] != '"':
            j = j + 2 if text[j] == "\\" else j + 1
        if j >= len(text):
            raise _Unreadable
        return j + 1
    if text.startswith("$(", i) or text.startswith("${", i):
        close = ")" if text[i + 1] == "(" else "}"
        opening = text[i + 1]
        depth, j = 1, i + 2
        while j < len(text) and depth:
            if text[j] in "'\"\\":
                j = _skip_quoted(text, j)
                continue
            depth += text[j] == opening
            depth -= text[j] == close
            j += 1
        if depth:
            raise _Unreadable
        return j
    return i + 1


def _word(text: str, i: int) -> tuple[str, int]:
    """The shell word starting at ``i`` (quotes and substitutions kept) and where it ends."""
    j = i
    while j < len(text) and text[j] not in _BLANK + ";&|()<>":
        j = _skip_quoted(text, j) if text[j] in "'\"\\$" else j + 1
    return text[i:j], j


def _skip_blank(text: str, i: int) -> int:
    while i < len(text):
        if text[i] in _BLANK:
            i += 1
        elif text[i] == "#":
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
        else:
            break
    return i


def _patterns(text: str, i: int) -> tuple[str, int]:
    """``(P1|P2)`` or ``P1|P2)`` from ``i``: the patterns as arguments, and the index past
    the closing parenthesis."""
    out: list[str] = []
    if i < len(text) and text[i] == "(":
        out.append(" ")
        i += 1
    start = i
    while i < len(text) and text[i] != ")":
        if text[i] in "'\"\\$":
            i = _skip_quoted(text, i)
        elif text[i] == "|":
            out.append(text[start:i] + " ")
            i += 1
            start = i
        elif text[i] == "\n":
            raise _Unreadable
        else:
            i += 1
    if i >= len(text):
        raise _Unreadable
    out.append(text[start:i])
    return ": " + "".join(out) + ";", i + 1


def _body(text: str, i: int) -> tuple[str, int, bool]:
    """A branch's commands from ``i``: (rewritten body, index past its terminator, whether
    the ``case`` ends here)."""
    depth, j = 0, i
    while j < len(text):
        char = text[j]
        if char in "'\"\\" or text.startswith("$(", j) or text.startswith("${", j):
            j = _skip_quoted(text, j)
            continue
        at_word = j == 0 or text[j - 1] in _BLANK + ";&|()"
        if at_word and re.match(r"case\b", text[j:]):
            depth += 1
        elif at_word and re.match(r"esac\b", text[j:]):
            if depth == 0:
                return _close(rewrite(text[i:j]), ""), j, True
            depth -= 1
        elif depth == 0 and text.startswith(";;", j):
            width = 3 if text.startswith(";;&", j) else 2
            return _close(rewrite(text[i:j]), " " * width), j + width, False
        elif depth == 0 and text.startswith(";&", j):
            return _close(rewrite(text[i:j]), "  "), j + 2, False
        j += 1
    raise _Unreadable


def _close(body: str, pad: str) -> str:
    """A body ended by ``;`` right after its last command (the line count kept)."""
    trimmed = body.rstrip(_BLANK)
    tail = body[len(trimmed) :]
    if trimmed and trimmed[-1] not in ";&":
        trimmed += ";"
    return trimmed + tail + pad


def _case(text: str, start: int) -> tuple[str, int]:
    """One ``case`` statement from ``start`` (at the word ``case``): its rewrite and where it
    ends."""
    out = [": "]
    i = _skip_blank(text, start + len("case"))
    word, i = _word(text, i)
    if not word:
        raise _Unreadable
    out.append(word)
    i = _skip_blank(text, i)
    if not re.match(r"in\b", text[i:]):
        raise _Unreadable
    out.append(" ;")
    i += 2
    while True:
        gap = _skip_blank(text, i)
        out.append(text[i:gap])
        i = gap
        if re.match(r"esac\b", text[i:]):
            out.append(":   ")
            return "".join(out), i + 4
        pattern, i = _patterns(text, i)
        out.append(pattern)
        body, i, ended = _body(text, i)
        out.append(body)
        if ended:
            out.append(":   ")
            return "".join(out), i + 4


def rewrite(text: str) -> str:
    """``text`` with its here-document delimiters unquoted and its ``case`` statements
    turned into plain command lists (unchanged when it cannot follow them)."""
    text = _QUOTED_HEREDOC.sub(lambda m: f"<<{m.group(1)} {m.group(3)}  ", text)
    text = rewrite_arithmetic(text)
    out: list[str] = []
    i = 0
    while True:
        found = _CASE.search(text, i)
        if found is None:
            out.append(text[i:])
            return "".join(out)
        start = text.index("case", found.start())
        try:
            rewritten, end = _case(text, start)
        except (_Unreadable, IndexError):
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:start])
        out.append(rewritten)
        i = end
