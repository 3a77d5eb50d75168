"""The audit reads exactly the files a bundle packs: one rule (hookbus.bus.shipped) decides
both, so a file the bundle carries is never left unaudited and a file it leaves out (byte
code, caches, version control, editor litter, the reload stamp) never blocks a reload."""

from __future__ import annotations

import os
from pathlib import Path

from hookbus.audit.folder import audit_folder
from hookbus.bundles.pack import collect_files

FILES = (
    "guard/HOOK.toml",
    "guard/run.sh",
    "guard/lib/util.py",
    "guard/lib/util.pyc",
    "guard/__pycache__/util.cpython-311.pyc",
    "guard/.git/config",
    "guard/.ruff_cache/x",
    "guard/notes.md~",
    "guard/.run.sh.swp",
    "guard/.DS_Store",
    "guard/.env.example",
    "hooks_reload.stamp",
    "README.md",
)


def test_the_audit_flags_exactly_the_files_the_bundle_packs(tmp_path: Path) -> None:
    for rel in FILES:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            'name = "guard"\nevents = ["PreToolUse"]\n[action.shell]\ncommand = "sh run.sh"\n'
            if rel.endswith("HOOK.toml")
            else "exit 0\n"
        )
        os.chmod(path, 0o666)  # world-writable: the audit flags every file it reads
    os.chmod(tmp_path / "guard" / "run.sh", 0o777)
    packed = {f.path for f in collect_files(tmp_path, max_bytes=1 << 20)}
    report = audit_folder(tmp_path)
    flagged = {f.file for f in report.findings if f.rule == "world-writable"}
    assert packed == {
        "guard/HOOK.toml",
        "guard/run.sh",
        "guard/lib/util.py",
        "guard/.env.example",
        "README.md",
    }
    assert flagged == packed
