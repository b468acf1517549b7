"""This worker host's name, as leases and the worker registry record it."""

from __future__ import annotations

import os
import socket


def worker_host() -> str:
    """``SB_WORKER_NAME`` if set (several workers sharing one host name — containers, the
    cluster bench's namespaces — stay apart), else the host name."""
    # At most 80 characters: "host:pid" must fit the step's leased_by (100).
    return (os.environ.get("SB_WORKER_NAME", "").strip() or socket.gethostname())[:80]
