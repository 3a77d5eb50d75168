"""Helpers shared by ``test_harness_imports.py`` and the test modules that
need the same set-up (a test module never imports another)."""

from __future__ import annotations

FORBIDDEN = (
    "redis",
    "hiredis",
    "typer",
    "click",
    "rich",
    "pydantic",
    "pydantic_settings",
    "rq",
    "msgspec",
    "dataclasses",
    "tomllib",
    "hookbus.bus.kinds",
    "hookbus.bus.settings.loader",
    "hookbus.bus.dev_state",  # only read when no Redis URL is configured
)
