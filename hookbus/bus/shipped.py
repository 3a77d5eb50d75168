"""Which files of a hooks folder are part of it: what a bundle packs, so what the audit
reads and what every worker runs.

Caches and version control are not hooks, nor are byte code, editor litter or the reload
stamp a single host touches in the folder. The bundle packer and the audit both ask here,
so the audit can never pass a file the bundle leaves out, nor miss one it carries.
"""

from __future__ import annotations

#: The file ``hookbus reload`` touches to tell a single host "read the folder again".
STAMP_FILENAME = "hooks_reload.stamp"
#: Folders never packed into a bundle (caches and version control, not hooks).
SKIP_DIR_NAMES = frozenset(
    {"__pycache__", ".git", ".hg", ".svn", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
)
#: File suffixes never packed (byte code and editor litter).
SKIP_FILE_SUFFIXES = (".pyc", ".pyo", ".swp", "~")
#: File names never packed (desktop litter, the reload stamp).
SKIP_FILE_NAMES = frozenset({".DS_Store", STAMP_FILENAME})


def ships_dir(name: str) -> bool:
    """Whether a folder of this name is walked into (packed, audited)."""
    return name not in SKIP_DIR_NAMES


def ships_file(name: str) -> bool:
    """Whether a file of this name is packed (and so audited)."""
    return name not in SKIP_FILE_NAMES and not name.endswith(SKIP_FILE_SUFFIXES)
