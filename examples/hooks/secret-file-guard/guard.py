"""secret-file-guard: refuse tool calls that touch secret files.

Paths come from file tools' inputs and, for Bash, from every word of every command the shell
would run (:func:`hookbus.simple_commands`). A word with a glob
(``cat *.pem``) is refused when the glob would match a secret's name.
"""

from __future__ import annotations

import fnmatch
import posixpath
from typing import Any

from hookbus import simple_commands

REASON = "refused: the call touches a secret file ({path}); use a placeholder or ask a person"

#: Exact file names that hold secrets.
NAMES = frozenset(
    {".env", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", ".netrc", ".pgpass", ".git-credentials"}
)
#: Endings of secret file names (``prod.env``, ``server.pem``...).
SUFFIXES = (".env", ".pem", ".key", ".p12", ".pfx", ".jks", ".keystore")
#: ``.env.<x>`` files that are committed templates, not secrets.
TEMPLATES = frozenset({"example", "sample", "template", "dist", "defaults"})
#: Names a glob is tried against: it is refused when it would match one of them.
SAMPLES = (".env", ".env.production", "prod.env", "server.pem", "tls.key", "id_rsa", "id_ed25519")
#: File tools' input fields that name a path.
PATH_FIELDS = ("file_path", "path", "notebook_path")
#: Fields that list the paths of a tool reading several files (Cline's ``read_files``).
PATH_LIST_FIELDS = ("file_paths",)


def is_secret(path: str) -> bool:
    name = posixpath.basename(path.strip().rstrip("/"))
    if not name:
        return False
    if any(ch in name for ch in "*?["):
        return any(fnmatch.fnmatchcase(sample, name) for sample in SAMPLES)
    if name in NAMES or name.endswith(SUFFIXES):
        return True
    if name.startswith(".env."):
        return name[len(".env.") :].split(".")[0] not in TEMPLATES
    return path.rstrip("/").endswith((".aws/credentials", ".ssh/config", ".docker/config.json"))


def _words(command: str) -> list[str]:
    words: list[str] = []
    for argv in simple_commands(command):
        for word in argv[1:]:
            words.append(word)
            if word.startswith("-") and "=" in word:  # --env-file=.env
                words.append(word.split("=", 1)[1])
            if word.startswith("@"):  # curl -d @.env
                words.append(word[1:])
    return words


def touched(tool_input: dict[str, Any]) -> str | None:
    """The first secret path a tool input names, or None."""
    candidates = [tool_input[f] for f in PATH_FIELDS if isinstance(tool_input.get(f), str)]
    for field in PATH_LIST_FIELDS:
        listed = tool_input.get(field)
        if isinstance(listed, list):
            candidates.extend(p for p in listed if isinstance(p, str))
    command = tool_input.get("command")
    if isinstance(command, str):
        candidates.extend(_words(command))
    for path in candidates:
        if is_secret(path):
            return path
    return None


def check(event: Any) -> dict[str, str] | None:
    """The hook: deny a call that names a secret file, say nothing otherwise."""
    tool_input = event.payload.get("tool_input")
    if not isinstance(tool_input, dict):
        return None
    path = touched(tool_input)
    if path is None:
        return None
    return {"outcome": "deny", "reason": REASON.format(path=path)}
