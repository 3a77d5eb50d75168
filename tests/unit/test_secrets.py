"""What counts as a secret on a command line or in a configuration file."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookbus.bus.settings.secrets import (
    command_line_warnings,
    config_file_warning,
    url_has_password,
)


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("redis://user:pw@host:6379/0", True),
        ("redis://:pw@host", True),
        ("rediss://user:p%40ss@host", True),
        ("redis+cluster://u:pw@a:1,b:2", True),
        ("redis://user@host", False),
        ("redis://user:@host", False),
        ("redis://host:6379/0", False),
        ("unix:///tmp/redis.sock", False),
        ("not a url", False),
    ],
)
def test_a_password_in_a_url_is_recognised(url: str, secret: bool) -> None:
    assert url_has_password(url) is secret


def test_each_secret_on_a_command_line_gets_one_warning() -> None:
    assert command_line_warnings(["--redis-url", "redis://u:pw@h", "status"])
    assert command_line_warnings(["--redis-url=redis://u:pw@h", "status"])
    assert command_line_warnings(["gateway", "--token", "t"])
    assert command_line_warnings(["gateway", "--token=t"])
    assert command_line_warnings(["--redis-url", "redis://h", "status"]) == []
    assert command_line_warnings(["gateway", "--token-file", "f"]) == []
    warnings = command_line_warnings(["--redis-url", "redis://u:pw@h", "gateway", "--token", "t"])
    assert len(warnings) == 2 and not any("pw@" in w for w in warnings)


def test_a_config_file_is_flagged_only_when_it_holds_a_password_others_can_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "hookbus.toml"
    path.write_text("x")
    path.chmod(0o644)
    assert config_file_warning(str(path), {"redis_url": "redis://u:pw@h"}) is not None
    assert config_file_warning(str(path), {"rq": {"redis_url": "redis://u:pw@h"}}) is not None
    assert config_file_warning(str(path), {"redis_url": "redis://h"}) is None
    path.chmod(0o600)
    assert config_file_warning(str(path), {"redis_url": "redis://u:pw@h"}) is None
