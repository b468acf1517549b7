"""bench/fragile_server.py: the far end of ``bench flow`` pushes back as its mode says, and
counts what it did (real sockets to its own process; no database)."""

from __future__ import annotations

import concurrent.futures
import http.client
import time

import pytest

from bench.fragile_server import FragileServer


def call(connection: http.client.HTTPConnection) -> tuple[int, str | None]:
    connection.request("POST", "/call", body=b'{"item": 1}', headers={"Content-Type": "application/json"})
    answer = connection.getresponse()
    answer.read()
    return answer.status, answer.getheader("Retry-After")


@pytest.fixture
def serve():
    started: list[FragileServer] = []

    def start(mode: str, latency: float, **rules) -> FragileServer:
        server = FragileServer(mode, latency, **rules).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def test_rate_mode_allows_r_per_window_then_answers_429_with_the_seconds_until_a_place_frees(serve):
    # A 60 s window, so the whole test falls inside one: the first 5 are accepted, the rest wait.
    server = serve("rate", 0.0, rate=5, window=60.0)
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    answers = [call(connection) for _ in range(8)]
    connection.close()
    server.stop()
    assert [status for status, _ in answers] == [200] * 5 + [429] * 3
    assert all(retry is None for _, retry in answers[:5])
    assert all(59 <= int(retry or 0) <= 60 for _, retry in answers[5:]), answers
    figures = server.figures
    assert (figures.calls, figures.ok, figures.throttled, figures.errors) == (8, 5, 3, 0)
    assert figures.max_window == 5
    assert figures.early == 2, "the two calls after the first 429 came inside its Retry-After"
    assert figures.ok_by_second[0] == 5 and figures.throttled_by_second[0] == 3
    assert len(figures.arrivals) == 8 and figures.arrivals == sorted(figures.arrivals)


def test_capacity_mode_holds_c_requests_and_answers_503_without_retry_after_to_the_excess(serve):
    # Held 3 s each: all 6 requests arrive while the first ones are still held.
    server = serve("capacity", 3.0, capacity=4)

    def one(_: int) -> tuple[int, str | None]:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            return call(connection)
        finally:
            connection.close()

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(one, range(6)))
    server.stop()
    assert sorted(status for status, _ in answers) == [200] * 4 + [503] * 2
    assert all(retry is None for _, retry in answers)
    figures = server.figures
    assert (figures.calls, figures.ok, figures.throttled, figures.max_accepted) == (6, 4, 2, 4)
    # In flight counts every request until its answer, a 503 too (answered on the loop's next turn).
    assert 4 < figures.peak <= 6 and figures.in_flight == 0 and figures.answered == 6


def test_outage_mode_fails_every_call_for_its_seconds_once_it_has_accepted_enough_then_recovers(serve):
    server = serve("outage", 0.0, outage_after=3, outage_seconds=0.5)
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    statuses = [call(connection)[0] for _ in range(4)]
    deadline = time.monotonic() + 30
    while statuses[-1] != 200:
        assert time.monotonic() < deadline, "the outage never ended"
        statuses.append(call(connection)[0])
    connection.close()
    server.stop()
    assert statuses[:3] == [200, 200, 200]
    assert set(statuses[3:-1]) == {500} and statuses[-1] == 200
    figures = server.figures
    assert figures.errors == figures.calls_during_outage == len(statuses) - 4
    assert figures.ok == 4 and figures.calls == len(statuses)
    assert figures.outage_from is not None and figures.outage_until == pytest.approx(figures.outage_from + 0.5)


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="mode must be one of rate, capacity, outage"):
        FragileServer("flaky", 0.0)
