"""Canonical form and content hash (S14).

The canonical form is the normalised AST (every optional field present with its value or
default, list-valued sets sorted) serialised with RFC 8785 JSON canonicalisation, so key
order, whitespace, number spelling (``1`` vs ``1.0``) and omitted-vs-explicit defaults never
change it, while any change of logic does. The hash is the hex SHA-256 of those bytes.

Hash stability is a compatibility contract: tests/fixtures/dsl_hashes.json pins the hash of
stored documents, so a change here that alters an existing hash fails the suite.
"""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

from workflows.dsl.ast import Workflow
from workflows.dsl.parser import parse


def canonical_of(workflow: Workflow) -> bytes:
    return rfc8785.dumps(workflow.to_dict())


def canonical(doc: dict[str, Any]) -> bytes:
    """The RFC 8785 canonical bytes of a document; raises DslError if it is invalid."""
    return canonical_of(parse(doc))


def content_hash(doc: dict[str, Any]) -> str:
    """Hex SHA-256 of ``canonical(doc)``."""
    return hashlib.sha256(canonical(doc)).hexdigest()


def hash_of(workflow: Workflow) -> str:
    return hashlib.sha256(canonical_of(workflow)).hexdigest()
