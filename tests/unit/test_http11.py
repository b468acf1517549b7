"""The request framing of the event-loop transport (executions/destinations/http11.py), as a
pure function: what it writes, and what it refuses to write. Everything a server may do to
the transport is the conformance suite's (tests/integration/test_transport_conformance.py,
against tests/support/awkward_server.py)."""

from __future__ import annotations

import pytest

from executions.destinations import http11


@pytest.mark.parametrize("name, value", [("X-A", " leading"), ("X-A", "trailing "), ("X-A", "nul\x00"),
                                         ("X-A", "del\x7f"), ("X-A", "cr\ronly"), ("X A", "1"), ("X:A", "1"),
                                         ("X-A", "line\nbreak")])
def test_headers_that_cannot_be_framed_are_refused_before_sending(name, value):
    with pytest.raises(http11.RequestRefused, match=r"not valid HTTP/1\.1"):
        http11.request_bytes("GET", b"/x", [(name, value)], b"")


def test_a_request_is_written_as_given():
    written = http11.request_bytes("POST", b"/a?b=1", [("Host", "h:8"), ("X-Empty", ""), ("X-Tab", "a\tb c")], b"{}")
    assert written == b"POST /a?b=1 HTTP/1.1\r\nHost: h:8\r\nX-Empty: \r\nX-Tab: a\tb c\r\n\r\n{}"
