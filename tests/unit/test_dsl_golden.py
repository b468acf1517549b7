"""Golden fixtures: stored DSL documents → their canonical bytes → their hash (S14).

Hash stability is a compatibility contract: a version's id is its hash, so a change to
parsing, defaults or canonicalisation that alters the hash of an existing document must
fail here. Never "fix" this test by re-recording the values; if a change of canonical form
is intended, it needs a migration story for every stored version first.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from workflows.dsl import canonical, content_hash, parse

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
DOCUMENTS = FIXTURES / "dsl"
HASHES: dict[str, str] = json.loads((FIXTURES / "dsl_hashes.json").read_text())
KINDS = {"TASK", "HTTP", "SPAWNER", "MERGE", "TIMER", "WAIT", "CHOICE", "CHAIN", "SUCCEED", "FAIL"}


def load(name: str) -> dict:
    return json.loads((DOCUMENTS / name).read_text())


def canonical_file(name: str) -> Path:
    return DOCUMENTS / f"{Path(name).stem}.canonical.json"


def test_every_fixture_has_a_recorded_hash_and_canonical_form() -> None:
    documents = {p.name for p in DOCUMENTS.glob("*.json") if not p.name.endswith(".canonical.json")}
    assert documents == set(HASHES)
    assert {p.name for p in DOCUMENTS.glob("*.canonical.json")} == {canonical_file(n).name for n in documents}


def test_the_fixtures_cover_every_vertex_kind() -> None:
    kinds = {vertex["type"] for name in HASHES for vertex in load(name)["vertices"].values()}
    assert kinds == KINDS


@pytest.mark.parametrize("name", sorted(HASHES))
def test_the_hash_is_the_recorded_one(name: str) -> None:
    assert content_hash(load(name)) == HASHES[name]


@pytest.mark.parametrize("name", sorted(HASHES))
def test_the_canonical_bytes_are_the_stored_ones(name: str) -> None:
    stored = canonical_file(name).read_bytes()
    assert canonical(load(name)) == stored
    assert hashlib.sha256(stored).hexdigest() == HASHES[name]


@pytest.mark.parametrize("name", sorted(HASHES))
def test_the_stored_canonical_form_is_a_fixed_point(name: str) -> None:
    stored = canonical_file(name).read_bytes()
    assert canonical(json.loads(stored)) == stored
    assert parse(json.loads(stored)) == parse(load(name))


def test_hashes_are_distinct() -> None:
    assert len(set(HASHES.values())) == len(HASHES)
