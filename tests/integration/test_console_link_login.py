"""A notification's link opens its item after login: ``/approvals#ID`` shows the login
page, and logging in there lands on ``/approvals#ID``, never on another site. A real
console and Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookbus.console.app import _local_target
from tests.console_helpers import TOKEN, ConsoleProc, chromium


def test_a_link_to_an_item_lands_on_it_after_login(
    real_redis_url: str, namespace: str, tmp_path: Path
) -> None:
    console = ConsoleProc(real_redis_url, namespace, tmp_path)
    try:
        with chromium() as browser:
            page = browser.new_context().new_page()
            page.goto(f"{console.base}/approvals#a1b2c3d4e5f6")
            page.fill("input[name=token]", TOKEN)
            page.click("button[type=submit]")
            page.wait_for_url(f"{console.base}/approvals#a1b2c3d4e5f6", timeout=10_000)
            assert "Approvals" in page.title()
    finally:
        console.stop()


@pytest.mark.parametrize(
    ("path", "fragment", "target"),
    [
        ("/approvals", "a1b2c3d4e5f6", "/approvals#a1b2c3d4e5f6"),
        ("//evil.example/x", "", "/"),
        ("https://evil.example/", "", "/"),
        ("/approvals", "x<script>", "/approvals"),
    ],
)
def test_a_login_goes_on_only_to_the_consoles_own_pages(
    path: str, fragment: str, target: str
) -> None:
    assert _local_target(path, fragment) == target
