"""Which addresses outbound calls may reach (executions/destinations/outbound.py), without any network."""

from __future__ import annotations

import ipaddress

import pytest

from executions.destinations.outbound import Policy, refusal_reason


@pytest.mark.parametrize(("address", "reason"), [
    ("127.0.0.1", "loopback"),
    ("127.0.0.2", "loopback"),
    ("::1", "loopback"),
    ("169.254.169.254", "link-local"),
    ("fe80::1", "link-local"),
    ("10.0.0.1", "private"),
    ("172.16.5.4", "private"),
    ("192.168.1.1", "private"),
    ("fc00::1", "private"),
    ("100.64.0.1", "non-public"),  # shared address space (carrier-grade NAT)
    ("224.0.0.1", "multicast"),
    ("ff02::1", "multicast"),
    ("0.0.0.0", "unspecified"),  # noqa: S104 - an address under test, nothing binds to it
    ("::", "unspecified"),
    ("255.255.255.255", "private"),
    ("::ffff:10.0.0.1", "private"),  # IPv4-mapped: judged by the IPv4 address inside
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:169.254.169.254", "link-local"),
    ("2002:a9fe:a9fe::1", "link-local"),  # 6to4 around 169.254.169.254
    ("::a00:1", "non-public"),  # IPv4-compatible (deprecated)
    ("64:ff9b::a00:1", "non-public"),  # NAT64
    ("8.8.8.8", None),
    ("2001:4860:4860::8888", None),
    ("::ffff:8.8.8.8", None),
])
def test_only_public_unicast_addresses_are_reachable_by_default(address, reason):
    assert refusal_reason(ipaddress.ip_address(address)) == reason
    assert Policy().allows("host.example", ipaddress.ip_address(address)) is (reason is None)


def test_sb_outbound_allow_opens_networks_and_host_names():
    policy = Policy.parse(" 127.0.0.0/8, ::1 ,10.1.2.3, Internal.Example. ,")
    allowed = ["127.0.0.1", "127.9.9.9", "::1", "::ffff:127.0.0.1", "10.1.2.3"]
    assert all(policy.allows("x.example", ipaddress.ip_address(a)) for a in allowed)
    refused = ["10.1.2.4", "169.254.169.254", "::ffff:10.0.0.1", "192.168.0.1"]
    assert not any(policy.allows("x.example", ipaddress.ip_address(a)) for a in refused)
    # A host name opens that name (whatever it resolves to), not others at the same address.
    assert policy.allows("internal.example", ipaddress.ip_address("10.9.9.9"))
    assert policy.allows("INTERNAL.example.", ipaddress.ip_address("10.9.9.9"))
    assert not policy.allows("other.example", ipaddress.ip_address("10.9.9.9"))


@pytest.mark.parametrize("text", ["127.0.0.0/33", "not a host", "*.example", "a..b", "http://x"])
def test_a_bad_allow_list_entry_is_named(text):
    with pytest.raises(ValueError, match="SB_OUTBOUND_ALLOW"):
        Policy.parse(text)


def test_a_bad_allow_list_fails_the_system_check_and_opens_nothing(settings, caplog):
    from executions.destinations import outbound

    settings.SB = {**settings.SB, "OUTBOUND_ALLOW": "127.0.0.0/8,loopback please"}
    [error] = outbound.outbound_allow_is_valid(None)
    assert error.id == "schemabridge.E020" and "'loopback please'" in error.msg
    assert outbound.policy() == Policy()  # fail closed
    assert "outbound calls reach public addresses only" in caplog.text
    settings.SB = {**settings.SB, "OUTBOUND_ALLOW": "127.0.0.0/8,::1"}
    assert outbound.outbound_allow_is_valid(None) == []
