"""``POST /logout`` ends the operator's console session only when the console's own page
sends it: another site's form (a cross-site POST, with its own ``Origin``) is refused and
the session lives on, so a page the operator visits cannot log them out."""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import redis
from starlette.testclient import TestClient

from hookbus.bus.settings.loader import Settings
from hookbus.console.app import create_app
from hookbus.console.auth import COOKIE
from tests.console_helpers import TOKEN as CONSOLE_TOKEN
from tests.console_helpers import ConsoleProc, chromium, free_port

TOKEN = "console-token-0123456789"
OWN = "http://testserver"


def _logged_in(client: TestClient) -> None:
    response = client.post("/login", data={"token": TOKEN}, follow_redirects=False)
    assert response.status_code == 303 and COOKIE in response.cookies


def test_a_cross_site_logout_is_refused_and_the_session_lives_on(
    real_redis_url: str, real_redis: redis.Redis, namespace: str
) -> None:
    app = create_app(Settings(redis_url=real_redis_url, namespace=namespace), token=TOKEN)
    with TestClient(app, base_url=OWN) as client:
        _logged_in(client)
        sid = client.cookies[COOKIE]
        for forged in (
            {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
            {"Origin": "null"},  # a sandboxed frame or a redirect chain
            {"Sec-Fetch-Site": "cross-site"},  # a browser that sent no Origin
            {"Sec-Fetch-Site": "same-site", "Origin": "http://other.testserver"},
        ):
            refused = client.post("/logout", headers=forged, follow_redirects=False)
            assert refused.status_code == 403, forged
            assert "set-cookie" not in refused.headers, forged
            assert client.get("/api/approvals").status_code == 200, forged
        # the console's own Log out button does log out
        done = client.post(
            "/logout",
            headers={"Origin": OWN, "Sec-Fetch-Site": "same-origin"},
            follow_redirects=False,
        )
        assert done.status_code == 303
        client.cookies.clear()
        client.cookies.set(COOKIE, sid)  # the old cookie no longer opens anything
        assert client.get("/api/approvals").status_code == 401


def test_another_sites_page_in_a_real_browser_does_not_log_the_operator_out(
    real_redis_url: str, real_redis: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    console = ConsoleProc(real_redis_url, namespace, tmp_path)
    # the other site: "localhost" is another site than the console's 127.0.0.1
    (tmp_path / "evil").mkdir()
    (tmp_path / "evil" / "index.html").write_text(
        f'<form id="f" method="post" action="{console.base}/logout"></form>'
        "<script>document.getElementById('f').submit()</script>"
    )
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(tmp_path / "evil"))
    evil = ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        with chromium() as browser:
            page = browser.new_page()
            page.goto(f"{console.base}/?token={CONSOLE_TOKEN}")
            assert page.url.rstrip("/") == console.base
            page.goto(f"http://localhost:{evil.server_address[1]}/")
            # its form posts to the console's /logout (refused, or on to /login)
            page.wait_for_url(lambda url: url.startswith(console.base))
            page.wait_for_load_state()
            page.goto(f"{console.base}/approvals")
            # still logged in: the approvals page, not the login form
            assert "/approvals" in page.url and page.locator("input[name=token]").count() == 0
            # the console's own Log out button does log out
            page.locator("form.logout button").click()
            page.wait_for_url(f"{console.base}/login")
            page.goto(f"{console.base}/approvals")
            assert page.locator("input[name=token]").count() == 1
    finally:
        evil.shutdown()
        evil.server_close()
        console.stop()
