"""``hookbus cline install`` on a real folder: one ``/bin/sh`` hook file per event, the
guard's refusing the call whenever hookbus cannot answer (Cline would run it), the user's
own hook files never touched, and ``uninstall`` taking out exactly hookbus's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hookbus.harnesses import doctor
from hookbus.harnesses.cline_adapter import ADAPTER
from hookbus.harnesses.install import cline as cline_install
from hookbus.harnesses.install.cline import CONTROL_PREFIX, ENTRY_TIMEOUT_S, MARKER
from hookbus.harnesses.install.table import InstallError

ROOT = Path(__file__).resolve().parents[2]
HOOKBUS = "/opt/hookbus/bin/hookbus"
#: Cline's own timeout of a PreToolUse / PostToolUse hook, in seconds (3.0.65).
CLINE_TIMEOUT_S = 120


def control(stdout: str) -> dict[str, object]:
    """What Cline reads from a hook's stdout: its last ``HOOK_CONTROL`` line, else all of it."""
    lines = [line for line in stdout.splitlines() if line.startswith(f"{CONTROL_PREFIX}\t")]
    found: dict[str, object] = json.loads(lines[-1][len(CONTROL_PREFIX) + 1 :] if lines else stdout)
    return found


def run_file(path: Path) -> subprocess.CompletedProcess[str]:
    """The hook file as Cline runs it: its ``#!`` interpreter with the file's path."""
    interpreter = path.read_text().splitlines()[0][2:].split()
    fixture = ROOT / "tests" / "fixtures" / "cline" / f"{path.name}.json"
    return subprocess.run(
        [*interpreter, str(path)], input=fixture.read_text(), capture_output=True, text=True
    )


def test_install_writes_one_sh_file_per_event_named_after_it(tmp_path: Path) -> None:
    folder = cline_install.settings_path("user", home=tmp_path)
    assert folder == tmp_path / ".cline" / "hooks"
    assert (
        cline_install.settings_path("project", project=tmp_path)
        == tmp_path / ".clinerules" / "hooks"
    )
    change = cline_install.install(folder, command=HOOKBUS)
    assert sorted(p.name for p in folder.iterdir()) == sorted(cline_install.installable_events())
    assert set(change.added) == set(ADAPTER.routes) - {"PreCompact"}
    post = (folder / "PostToolUse").read_text()
    assert post.startswith("#!/bin/sh\n") and MARKER in post
    assert post.endswith(f"\n{HOOKBUS} cline hook --timeout {ENTRY_TIMEOUT_S}\n")
    guard = (folder / "PreToolUse").read_text().splitlines()[-1]
    assert guard.startswith(f"{HOOKBUS} cline hook --timeout {ENTRY_TIMEOUT_S} || printf ")
    assert ENTRY_TIMEOUT_S <= CLINE_TIMEOUT_S - 15  # the answer comes well before Cline gives up
    assert (folder / "PreToolUse").stat().st_mode & 0o777 == 0o755


@pytest.mark.parametrize(
    "body",
    [
        None,  # cannot start
        "exit 1",  # fails before printing
        "printf '{\"overrideInput\": '; exit 1",  # fails half way through its answer
    ],
)
def test_the_guard_file_refuses_the_call_when_hookbus_cannot_answer(
    body: str | None, tmp_path: Path
) -> None:
    broken = tmp_path / "bin" / "hookbus"
    if body is not None:
        broken.parent.mkdir()
        broken.write_text(f"#!/bin/sh\ncat >/dev/null\n{body}\n")
        broken.chmod(0o755)
    hooks = tmp_path / "hooks"
    cline_install.install(hooks, command=str(broken), events=["PreToolUse"])
    done = run_file(hooks / "PreToolUse")
    assert done.returncode == 0
    answer = control(done.stdout)
    assert answer["cancel"] is True
    assert str(answer["errorMessage"]).startswith("hookbus is unavailable")


def test_the_user_scope_follows_cline_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLINE_DIR", str(tmp_path / "cline"))
    assert cline_install.settings_path("user") == tmp_path / "cline" / "hooks"
    assert cline_install.INSTALLER.settings_path("user", None) == tmp_path / "cline" / "hooks"


def test_install_twice_changes_nothing_and_uninstall_leaves_the_users_files(tmp_path: Path) -> None:
    mine = tmp_path / "PreToolUse.sh"
    mine.write_text("#!/bin/sh\necho mine\n")
    first = cline_install.install(tmp_path, command=HOOKBUS)
    assert first.changed and first.before is None
    again = cline_install.install(tmp_path, command=HOOKBUS)
    assert not again.changed
    gone = cline_install.uninstall(tmp_path)
    assert set(gone.removed) == set(first.added)
    assert [p.name for p in tmp_path.iterdir()] == ["PreToolUse.sh"]
    assert mine.read_text() == "#!/bin/sh\necho mine\n"
    assert not cline_install.uninstall(tmp_path).changed


def test_uninstall_removes_the_folder_install_made_when_nothing_else_is_in_it(
    tmp_path: Path,
) -> None:
    folder = tmp_path / ".cline" / "hooks"
    cline_install.install(folder, command=HOOKBUS)
    cline_install.uninstall(folder)
    assert not folder.exists()
    assert (tmp_path / ".cline").is_dir()


def test_a_users_file_with_an_events_name_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    (tmp_path / "PreToolUse").write_text("#!/bin/sh\necho mine\n")
    with pytest.raises(InstallError, match="hook file of your own"):
        cline_install.install(tmp_path, command=HOOKBUS)
    assert [p.name for p in tmp_path.iterdir()] == ["PreToolUse"]


def test_fewer_events_take_the_others_out_and_a_dry_run_writes_nothing(tmp_path: Path) -> None:
    cline_install.install(tmp_path, command=HOOKBUS)
    change = cline_install.install(tmp_path, command=HOOKBUS, events=["PreToolUse"], dry_run=True)
    assert "PostToolUse" in change.removed and "PostToolUse <==" in change.diff()
    assert (tmp_path / "PostToolUse").exists()
    cline_install.install(tmp_path, command=HOOKBUS, events=["PreToolUse", "PostToolUse"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["PostToolUse", "PreToolUse"]
    with pytest.raises(InstallError, match="not a Cline event"):
        cline_install.install(tmp_path, command=HOOKBUS, events=["BeforeTool"])


def test_http_mode_posts_to_the_gateway_and_the_guard_keeps_its_fallback(tmp_path: Path) -> None:
    cline_install.install(tmp_path, command=HOOKBUS, mode="http", url="http://gw:8787")
    guard = (tmp_path / "PreToolUse").read_text().splitlines()[-1]
    assert guard.startswith("curl ") and "http://gw:8787/v1/hooks/cline?timeout=100" in guard
    assert f"|| printf '\\n{CONTROL_PREFIX}\\t%s\\n' " in guard
    assert (tmp_path / "PostToolUse").read_text().splitlines()[-1].endswith(" || true")


def test_doctor_finds_the_files_and_no_guard_that_fails_open(tmp_path: Path) -> None:
    cline_install.install(tmp_path, command=HOOKBUS)
    installer = cline_install.INSTALLER
    report = doctor.check_scope(ADAPTER, installer, "user", tmp_path, "/usr/bin:/bin")
    assert report.events == sorted(cline_install.installable_events())
    assert [f for f in report.findings if f.severity == doctor.FAILS_OPEN] == []
    (tmp_path / "PreToolUse").unlink()
    report = doctor.check_scope(ADAPTER, installer, "user", tmp_path, "/usr/bin:/bin")
    assert any(
        "PreToolUse" in f.message for f in report.findings if f.severity == doctor.FAILS_OPEN
    )


def test_the_command_installs_says_no_backup_and_uninstalls(tmp_path: Path) -> None:
    folder = tmp_path / "hooks"

    def hookbus(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "hookbus", "cline", *args, "--settings", str(folder)],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "dry run" in hookbus("install", "--dry-run", "--command", HOOKBUS)
    assert not folder.exists()
    assert "cline hook" in hookbus("install", "--command", HOOKBUS, "--verbose")
    assert "already installed" in hookbus("install", "--command", HOOKBUS)
    line = hookbus("uninstall")
    assert line.startswith("uninstalled hookbus from") and "hookbus-backup" not in line
    assert not folder.exists()
