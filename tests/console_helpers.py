"""Shared parts of the console tests: a ``hookbus console`` process, a headless Chromium
(Debian's, driven by playwright) and screenshots for docs/console.md when asked for.

Screenshots are written to docs/images only when ``HOOKBUS_TEST_SCREENSHOTS=1``: a normal
run writes nothing outside its temporary folders.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
TOKEN = "console-test-token-0123456789"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ConsoleProc:
    """``hookbus console`` on a free loopback port, for one test."""

    def __init__(
        self,
        url: str,
        ns: str,
        hooks_dir: Path,
        *,
        operator: str = "ann",
        tokens_file: Path | None = None,
    ) -> None:
        """With ``tokens_file`` (``NAME TOKEN`` lines) each operator logs in with their own
        token; else one shared token (:data:`TOKEN`) decides as ``operator``."""
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = dict(
            os.environ,
            HOOKBUS_REDIS_URL=url,
            HOOKBUS_NAMESPACE=ns,
            HOOKBUS_CONSOLE_TOKEN=TOKEN,
            PYTHONPATH=str(ROOT),
        )
        who = ["--tokens", str(tokens_file)] if tokens_file is not None else ["--as", operator]
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "hookbus", "console",
                "--port", str(self.port), "--hooks-dir", str(hooks_dir), *who,
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        end = time.monotonic() + 20
        while time.monotonic() < end:
            assert self.proc.poll() is None, self.proc.stderr.read() if self.proc.stderr else ""
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base}/login", timeout=1).status_code == 200:
                    return
            time.sleep(0.05)
        raise AssertionError("the console did not start")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium (Debian's package) driven by playwright: yields a browser."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        raise AssertionError("chromium is not installed (apt-get install chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


def screenshot(page: Any, name: str) -> None:
    """Save ``docs/images/console-<name>.png`` when HOOKBUS_TEST_SCREENSHOTS=1 asks."""
    if os.environ.get("HOOKBUS_TEST_SCREENSHOTS") != "1":
        return
    IMAGES.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(IMAGES / f"console-{name}.png"), full_page=True)
