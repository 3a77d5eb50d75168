"""The unsigned-mode warning is said once per process, and not where ``hookbus dev`` said it."""

from __future__ import annotations

import logging

import pytest

from hookbus.bundles import signing


@pytest.fixture(autouse=True)
def nothing_said_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(signing, "_said", set())
    monkeypatch.delenv(signing.UNSIGNED_SAID_ENV, raising=False)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_each_side_s_warning_is_logged_once_per_process(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger=signing.__name__):
        for _ in range(3):
            signing.warn_unsigned("worker")
            signing.warn_unsigned("reload")
    said = _warnings(caplog)
    assert said == [signing.trust_warning("worker"), signing.trust_warning("reload")]


def test_a_worker_started_by_dev_keeps_the_warning_at_debug(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(signing.UNSIGNED_SAID_ENV, "1")
    with caplog.at_level(logging.DEBUG, logger=signing.__name__):
        signing.warn_unsigned("worker")
    assert _warnings(caplog) == []
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]


def test_dev_marks_both_sides_said(caplog: pytest.LogCaptureFixture) -> None:
    signing.unsigned_said()
    with caplog.at_level(logging.DEBUG, logger=signing.__name__):
        signing.warn_unsigned("worker")
        signing.warn_unsigned("reload")
    assert caplog.records == []
