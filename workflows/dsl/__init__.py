"""The workflow DSL: parse, validate, canonicalise and hash. Pure Python, no Django.

Public API::

    parse(doc) -> Workflow          # raises DslError(.errors = [(json_path, message), ...])
    canonical(doc) -> bytes         # RFC 8785 bytes of the normalised AST
    content_hash(doc) -> str        # hex SHA-256 of canonical(doc)
"""

from workflows.dsl import ast
from workflows.dsl.ast import Workflow
from workflows.dsl.canonical import canonical, canonical_of, content_hash, hash_of
from workflows.dsl.errors import DslError
from workflows.dsl.parser import parse

__all__ = ["DslError", "Workflow", "ast", "canonical", "canonical_of", "content_hash", "hash_of", "parse"]
