"""Secrets stay off command lines and out of files others can read: a password in
``--redis-url`` and ``--token`` are warned about with the file alternative,
``HOOKBUS_REDIS_URL_FILE`` gives the URL from a file, and a ``hookbus.toml`` holding a
password that other users can read is warned about by the full settings loader and by the
per-event hook's lean reader alike."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hookbus.bus.settings.loader import load_settings
from hookbus.harnesses.lean.config import load as lean_load

ROOT = Path(__file__).resolve().parents[2]
SECRET_URL = "redis://app:s3cretpw@127.0.0.1:1/0"


def run(
    *args: str, env: dict[str, str] | None = None, timeout_s: float = 60
) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "hookbus", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=timeout_s,
        check=False,
        cwd=ROOT / "tests",
    )


def test_a_password_in_redis_url_on_the_command_line_is_warned_about() -> None:
    done = run("--redis-url", SECRET_URL, "--version")
    assert "--redis-url carries a password on the command line" in done.stderr
    assert "HOOKBUS_REDIS_URL_FILE" in done.stderr
    assert "s3cretpw" not in done.stderr
    assert run("--redis-url=redis://127.0.0.1:1/0", "--version").stderr == ""


def test_a_gateway_token_on_the_command_line_is_warned_about(tmp_path: Path) -> None:
    other = tmp_path / "tokens"
    other.write_text("alice 0123456789abcdef0123\n")
    done = run("gateway", "--token", "sekrit-token", "--tokens", str(other))
    assert "--token puts a secret on the command line" in done.stderr
    assert "--token-file" in done.stderr
    assert done.returncode != 0  # and two token sources at once are refused


def test_the_redis_url_can_come_from_a_file(tmp_path: Path) -> None:
    url_file = tmp_path / "redis-url"
    url_file.write_text(SECRET_URL + "\n")
    url_file.chmod(0o600)
    environ = {"HOOKBUS_REDIS_URL_FILE": str(url_file)}
    assert load_settings(environ=environ, cwd=tmp_path).settings.redis_url == SECRET_URL
    assert lean_load(environ, cwd=str(tmp_path)).redis_url == SECRET_URL
    both = {**environ, "HOOKBUS_REDIS_URL": "redis://127.0.0.1:2/0"}
    assert load_settings(environ=both, cwd=tmp_path).settings.redis_url.endswith(":2/0")


@pytest.mark.parametrize("mode", [0o644, 0o640])
def test_a_config_file_with_a_password_others_can_read_is_warned_about_by_every_reader(
    tmp_path: Path, mode: int, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "hookbus.toml"
    config.write_text(f'redis_url = "{SECRET_URL}"\n')
    config.chmod(mode)
    with caplog.at_level(logging.WARNING):
        load_settings(environ={}, cwd=tmp_path)
    assert any("chmod 600" in r.getMessage() for r in caplog.records)
    lean_load({}, cwd=str(tmp_path))
    assert "other users can read it" in capsys.readouterr().err
    done = run("--config", str(config), "status")
    assert "chmod 600" in done.stderr


def test_a_private_config_file_or_one_without_a_password_is_not_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "hookbus.toml"
    config.write_text(f'redis_url = "{SECRET_URL}"\n')
    config.chmod(0o600)
    with caplog.at_level(logging.WARNING):
        load_settings(environ={}, cwd=tmp_path)
    config.write_text('redis_url = "redis://127.0.0.1:1/0"\n')
    config.chmod(0o644)
    with caplog.at_level(logging.WARNING):
        load_settings(environ={}, cwd=tmp_path)
    lean_load({}, cwd=str(tmp_path))
    assert not [r for r in caplog.records if "chmod 600" in r.getMessage()]
    assert capsys.readouterr().err == ""


def test_a_console_token_file_others_can_read_is_refused_saying_chmod_600(tmp_path: Path) -> None:
    import socket

    token = tmp_path / "console.token"
    token.write_text("console-token-0123456789\n")
    token.chmod(0o644)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {"HOOKBUS_REDIS_URL": "redis://127.0.0.1:1/0"}
    args = ("console", "--token-file", str(token), "--port", str(port))
    try:
        done = run(*args, env=env, timeout_s=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the console served with a token file every user can read")
    assert done.returncode == 64, done.stderr
    assert "readable by other users" in done.stderr and f"chmod 600 {token}" in done.stderr


def test_a_signing_key_others_can_read_is_refused_saying_chmod_600(tmp_path: Path) -> None:
    from hookbus.bundles import signing
    from hookbus.errors import ConfigError

    pair = signing.generate_keys(tmp_path / "keys")
    pair.signing.chmod(0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        signing.load_signing_key(pair.signing)
    pair.signing.chmod(0o600)
    assert signing.load_signing_key(pair.signing) is not None
