"""What an answer says about flow control (executions/destinations/throttling.py, issue 29 §1)."""

from __future__ import annotations

import email.utils

import pytest

from executions.destinations import throttling

NOW = 1_800_000_000.0  # an epoch time


def headers(**given: str):
    values = {name.replace("_", "-"): value for name, value in given.items()}
    return lambda name: values.get(name, "")


@pytest.mark.parametrize(("status", "retry_after", "kind"), [
    (200, "", "ok"), (204, "", "ok"), (404, "", "refused"), (429, "", "throttled"), (429, "5", "throttled"),
    (503, "", "failed"), (503, "10", "throttled"), (503, "  ", "failed"), (500, "10", "failed"),
    (502, "", "failed"), (None, "", "failed"),
])
def test_a_429_or_a_503_with_retry_after_is_throttled_other_5xx_failed(status, retry_after, kind):
    assert throttling.kind(status, retry_after) == kind


def test_retry_after_in_delta_seconds():
    assert throttling.asked_seconds(headers(retry_after="10"), NOW) == 10.0
    assert throttling.asked_seconds(headers(retry_after=" 0 "), NOW) == 0.0


def test_retry_after_as_an_http_date():
    when = email.utils.formatdate(NOW + 42, usegmt=True)
    assert throttling.asked_seconds(headers(retry_after=when), NOW) == pytest.approx(42.0)
    past = email.utils.formatdate(NOW - 42, usegmt=True)
    assert throttling.asked_seconds(headers(retry_after=past), NOW) == 0.0


def test_ratelimit_reset_as_seconds_or_an_epoch_time():
    assert throttling.asked_seconds(headers(ratelimit_reset="7"), NOW) == 7.0
    assert throttling.asked_seconds(headers(x_ratelimit_reset=str(int(NOW) + 30)), NOW) == pytest.approx(30.0)
    assert throttling.asked_seconds(headers(x_ratelimit_reset="3"), NOW) == 3.0


def test_retry_after_wins_and_garbage_says_nothing():
    assert throttling.asked_seconds(headers(retry_after="2", ratelimit_reset="9"), NOW) == 2.0
    assert throttling.asked_seconds(headers(retry_after="soon"), NOW) is None
    assert throttling.asked_seconds(headers(retry_after="-5"), NOW) is None
    assert throttling.asked_seconds(headers(retry_after="nan", ratelimit_reset="inf"), NOW) is None
    assert throttling.asked_seconds(headers(), NOW) is None
    assert throttling.asked_seconds(headers(retry_after="soon", ratelimit_reset="4"), NOW) == 4.0


def test_the_wait_reason_names_what_the_server_said():
    assert throttling.shown_retry_after(headers(retry_after="10")) == "Retry-After 10"
    assert throttling.shown_retry_after(headers(x_ratelimit_reset="3")) == "X-RateLimit-Reset 3"
    assert throttling.shown_retry_after(headers()) == "no Retry-After"
