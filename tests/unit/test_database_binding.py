"""How statements reach PostgreSQL (settings.database_binding): bound on the server, and
prepared by default, with a way out for a pooler that cannot keep prepared statements."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from schemabridge_site.settings import database_binding


@pytest.fixture
def env(monkeypatch):
    monkeypatch.delenv("SB_DB_PREPARE_THRESHOLD", raising=False)
    return monkeypatch


def test_by_default_parameters_bind_on_the_server_and_statements_are_prepared_at_their_second_run(env):
    assert database_binding() == {"server_side_binding": True, "prepare_threshold": 2}


@pytest.mark.parametrize("value, expected", [("0", 0), ("5", 5), (" 7 ", 7)])
def test_the_prepare_threshold_is_a_setting(env, value, expected):
    env.setenv("SB_DB_PREPARE_THRESHOLD", value)
    assert database_binding() == {"server_side_binding": True, "prepare_threshold": expected}


@pytest.mark.parametrize("value", ["off", "OFF", "none"])
def test_prepared_statements_can_be_turned_off(env, value):
    env.setenv("SB_DB_PREPARE_THRESHOLD", value)
    assert database_binding() == {"server_side_binding": True}


@pytest.mark.parametrize("value", ["-1", "two", "2.5"])
def test_a_bad_threshold_stops_start_up_with_its_name(env, value):
    env.setenv("SB_DB_PREPARE_THRESHOLD", value)
    with pytest.raises(ImproperlyConfigured, match="SB_DB_PREPARE_THRESHOLD"):
        database_binding()
