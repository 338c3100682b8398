"""Which addresses a data destination may connect to (curaflow.outbound.destinations.is_public,
``Destinations.allows_address``, ``transport.GuardedBackend``).

A data destination (an image URL the source sent, a consumer's ``callback_url``) names a
host someone else controls, and its DNS answer too. Every address it resolves to is
judged where the connection is opened; these cases feed the guard a resolver's answer
(no network: the resolver and the connect are stubbed, and the stub records where the
connection would have gone).

An IPv6 address that carries an IPv4 address reaches that IPv4 host: an IPv4-mapped
address through the kernel, a NAT64 address (``64:ff9b::/96``, RFC 6052) through the
network's NAT64 gateway — an IPv6-only cluster with DNS64, an AWS subnet with a NAT
gateway, which translate to private IPv4 addresses of the VPC too. Python 3.11's
``is_global`` (the version the image runs) calls ``64:ff9b::a9fe:a9fe`` global, and
``::127.0.0.1``, ``2002:7f00:1::1``, ``fec0::1`` too: until 2026-12-06 a callback host
whose AAAA record was one of them was connected to.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
from typing import Any

import httpcore
import httpx
import pytest

from curaflow.outbound import DestinationRefused, Limits, Outbound, TimeLimitBeforeSending, data, parse_networks
from curaflow.outbound.destinations import is_public
from curaflow.outbound.transport import GuardedBackend

#: Addresses no data destination may reach unless a listed network holds them.
NOT_PUBLIC = [
    "127.0.0.1",
    "10.0.0.1",
    "169.254.169.254",
    "0.0.0.0",
    "100.64.0.1",
    "192.0.0.8",  # IETF protocol assignments (192.0.0.0/24): 3.11 judges only its /29
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "fd00:ec2::254",  # the instance metadata service over IPv6
    "ff02::1",
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:169.254.169.254",
    "64:ff9b::7f00:1",  # NAT64 (well-known prefix) of 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # … of 169.254.169.254
    "64:ff9b::a00:1",  # … of 10.0.0.1
    "64:ff9b:1::a00:1",  # a local-use NAT64 prefix (RFC 8215)
    "::127.0.0.1",  # IPv4-compatible (deprecated, RFC 4291 §2.5.5.1)
    "::8.8.8.8",
    "::ffff:0:7f00:1",  # IPv4-translated (RFC 2765)
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1 (deprecated, RFC 7526)
    "2002:808:808::1",  # 6to4 of a public address: the relay's, not the host's
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
    "fec0::1",  # site-local (deprecated, still routed where configured)
    "5f00::1",  # reserved (not 2000::/3)
    "3fff::1",  # documentation (RFC 9637)
    "2001:db8::1",
]
PUBLIC = [
    "8.8.8.8",
    "93.184.216.34",
    "2606:4700:4700::1111",
    "2a00:1450:4001:82b::200e",
    "::ffff:8.8.8.8",  # IPv4-mapped public: the IPv4 host itself
    "64:ff9b::808:808",  # NAT64 of a public address: an IPv6-only cluster reaching it through DNS64
]


@pytest.mark.parametrize("text", NOT_PUBLIC)
def test_an_address_that_is_or_carries_an_internal_one_is_not_public(text: str) -> None:
    address = ipaddress.ip_address(text)
    assert not is_public(address)
    assert not data(["hooks.example.org"], ()).allows_address(address)


@pytest.mark.parametrize("text", PUBLIC)
def test_a_public_address_and_its_mapped_or_nat64_form_are_public(text: str) -> None:
    address = ipaddress.ip_address(text)
    assert is_public(address)
    assert data(["hooks.example.org"], ()).allows_address(address)


def test_a_listed_network_allows_the_ipv4_address_an_ipv6_one_carries() -> None:
    # The operator lists the IPv4 network; an IPv6 address reaching it (mapped, NAT64) is
    # that network's. Listing the IPv6 prefix itself allows it too.
    inside = data(["h"], parse_networks(["10.0.0.0/8"]))
    assert inside.allows_address(ipaddress.ip_address("::ffff:10.1.2.3"))
    assert inside.allows_address(ipaddress.ip_address("64:ff9b::a01:203"))
    assert not inside.allows_address(ipaddress.ip_address("64:ff9b::7f00:1"))
    prefix = data(["h"], parse_networks(["64:ff9b::/96"]))
    assert prefix.allows_address(ipaddress.ip_address("64:ff9b::7f00:1"))


class _Resolver:
    """A stubbed DNS: each lookup of the name gives the next answer (addresses), and the
    connections the backend would open are recorded, never made."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.lookups: list[str] = []
        self.connects: list[str] = []

    async def getaddrinfo(self, host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        self.lookups.append(host)
        addresses = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        infos: list[Any] = []
        for text in addresses:
            if ":" in text:
                infos.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", (text, port, 0, 0)))
            else:
                infos.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (text, port)))
        return infos

    async def connect_tcp(self, host: str, port: int, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        self.connects.append(host)
        raise httpcore.ConnectError("stub: no network in this test")


def _stubbed(monkeypatch: pytest.MonkeyPatch, resolver: _Resolver, networks: list[str] | None = None) -> Outbound:
    out = Outbound(data(["hooks.example.org:8443"], parse_networks(networks or [])))
    backend = out.http._transport._pool._network_backend  # type: ignore[attr-defined]
    assert isinstance(backend, GuardedBackend)
    monkeypatch.setattr(backend.resolver, "lookup", resolver.getaddrinfo)
    monkeypatch.setattr(backend._inner, "connect_tcp", resolver.connect_tcp)
    return out


@pytest.mark.parametrize(
    "answer",
    [
        ["64:ff9b::a9fe:a9fe"],
        ["::127.0.0.1"],
        ["2002:7f00:1::1"],
        ["::ffff:127.0.0.1"],
        ["fec0::1", "10.0.0.7"],
    ],
)
async def test_a_name_resolving_to_an_address_carrying_an_internal_one_is_never_connected(
    monkeypatch: pytest.MonkeyPatch, answer: list[str]
) -> None:
    resolver = _Resolver(answer)
    out = _stubbed(monkeypatch, resolver)
    with pytest.raises(DestinationRefused, match="not allowed"):
        await out.request("POST", "https://hooks.example.org:8443/cb", content=b"{}", limits=Limits(time_s=5))
    assert resolver.connects == []
    await out.aclose()


async def test_of_several_addresses_only_the_public_ones_are_connected(monkeypatch: pytest.MonkeyPatch) -> None:
    resolver = _Resolver(["127.0.0.1", "64:ff9b::a00:1", "8.8.8.8", "169.254.169.254", "2606:4700:4700::1111"])
    out = _stubbed(monkeypatch, resolver)
    with pytest.raises(httpx.ConnectError):
        await out.request("POST", "https://hooks.example.org:8443/cb", content=b"{}", limits=Limits(time_s=5))
    assert resolver.connects == ["8.8.8.8", "2606:4700:4700::1111"]
    await out.aclose()


async def test_the_name_is_resolved_once_and_the_checked_address_is_the_one_connected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # DNS rebinding: a public answer for the check, 127.0.0.1 for a second lookup. There is
    # no second lookup: the backend connects to the address it checked, by its literal.
    resolver = _Resolver(["8.8.8.8"], ["127.0.0.1"])
    out = _stubbed(monkeypatch, resolver)
    with pytest.raises(httpx.ConnectError):
        await out.request("GET", "https://hooks.example.org:8443/cb", limits=Limits(time_s=5))
    assert resolver.lookups == ["hooks.example.org"]
    assert resolver.connects == ["8.8.8.8"]
    await out.aclose()


class _HangingDns:
    """``socket.getaddrinfo`` for one name whose DNS never answers until released (a
    consumer's authoritative server dropping queries: the system resolver waits its own
    timeout, 5 s a try and a server); every other name as the system answers it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.release = threading.Event()
        self.calls = 0
        self._real = socket.getaddrinfo

    def __call__(self, host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == self.name:
            self.calls += 1
            self.release.wait(30)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return self._real(host, *args, **kwargs)


async def test_lookups_of_a_name_whose_dns_never_answers_hold_one_thread_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each exchange is cut at its own time, but a lookup on a thread cannot be: it holds
    # its thread until the resolver gives up. Until 2026-12-06 data destinations looked
    # names up on the event loop's default executor (min(32, CPUs + 4) threads), which the
    # artifact store writes every image chunk with and every configured destination
    # resolves its name with: one consumer's callback host whose DNS hangs, pushed to by
    # enough jobs at once, stalled the worker's files and connections for every owner.
    dns = _HangingDns("slow.hooks.example.org")
    monkeypatch.setattr(socket, "getaddrinfo", dns)
    out = Outbound(data(["slow.hooks.example.org"], ()))
    try:
        cut = await asyncio.gather(
            *(
                out.request("POST", "https://slow.hooks.example.org/cb", content=b"{}", limits=Limits(time_s=0.2))
                for _ in range(40)
            ),
            return_exceptions=True,
        )
        assert all(isinstance(err, TimeLimitBeforeSending) for err in cut)
        # The default executor still serves the rest of the process while the lookup hangs.
        assert await asyncio.wait_for(asyncio.to_thread(lambda: "done"), 10) == "done"
        assert dns.calls == 1  # one lookup of the name at a time, however many exchanges wait for it
    finally:
        dns.release.set()
        await out.aclose()
