"""Which destinations an outbound client may reach (the destination guard's rules).

Two kinds of destination (DESIGN "The outbound layer"):

* **configured** — the operator wrote them down: a route's URL, the source's API and auth
  URLs, ``pixiv.image_url``. A client for them only ever talks to those origins (host and
  port), but any address they resolve to is allowed: the operator chose it.
* **data** — a party other than the operator chose them: the image URLs a source sends,
  a consumer's ``callback_url``. Their origin must be on an allow-list (host **and**
  port), and every address the host resolves to is checked when connecting: a
  loopback, private, link-local, multicast, reserved or unspecified address — or an IPv6
  address reaching such an IPv4 one (IPv4-mapped, NAT64), or of a prefix that carries one
  curaflow does not judge (:func:`is_public`) — is never connected to unless it lies in a
  network the operator listed (``outbound.private_networks``).

Port 0 is never a destination. Redirects are never followed (a redirect would be a
destination nobody checked).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

import httpx

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: An allow-list entry's port that matches any port 1..65535 (``host:*``).
ANY_PORT = -1
#: An allow-list entry's port that matches the URL scheme's default port (a bare ``host``).
DEFAULT_PORT = 0
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: The longest URL a request is made for (characters). Browsers and servers commonly stop
#: near 2 000 (servers answer 414 beyond their own bound); an image URL of Pixiv's is ~120.
MAX_URL_CHARS = 2048
#: Whitespace as ``str.isspace`` has it (the same code points), found in C.
_WHITESPACE = re.compile(r"\s")


def url_port(url: httpx.URL) -> int:
    """The port ``url`` connects to (its explicit port, else its scheme's default); 0 when unknown."""
    if url.port is not None:
        return url.port
    return _DEFAULT_PORTS.get(url.scheme, 0)


def url_problem(url: object) -> str | None:
    """Why ``url`` can never be requested as it is, or None.

    Not a string; longer than :data:`MAX_URL_CHARS`; holding whitespace or an unprintable
    character (control, format such as U+202E); not an ``http(s)`` URL with a host and a
    valid port; or a path with a dot-segment (``.`` / ``..``, percent-encoded once or
    more, or behind a backslash or an encoded slash): once normalised, such a path may
    leave the prefix it was meant to stay under (``<host>/i/../x`` is ``<host>/x``), so no
    path holding one is a file's. Only the text is judged here; who may be reached is the
    :class:`Destinations`' and the caller's rule.
    """
    if not isinstance(url, str):
        return f"a URL that is not text ({type(url).__name__})"
    if not url:
        return "an empty URL"
    if len(url) > MAX_URL_CHARS:
        return f"a URL of {len(url)} characters, over {MAX_URL_CHARS}"
    if not url.isprintable() or _WHITESPACE.search(url):
        return "a URL holding whitespace or an unprintable character"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not one
    except ValueError:
        return "not a URL"
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return "not an http(s) URL with a host"
    if climbs(parts.path):
        return "a URL whose path has a dot-segment (it could leave its prefix once normalised)"
    return None


def climbs(path: str) -> bool:
    """True when ``path`` holds a dot-segment once percent-decoded (up to three times), a
    backslash, or a segment that decodes to one of those (``%2e%2e%2f``, ``..%5c``)."""
    decoded = path
    for _ in range(3):
        before, decoded = decoded, unquote(decoded)
        if decoded == before:
            break
    if "\\" in decoded:
        return True
    return any(segment in (".", "..") for segment in decoded.split("/"))


@dataclass(frozen=True)
class Origin:
    """One allowed ``host:port``.

    Attributes:
        host: lower-case host name or address literal (IPv6 without brackets).
        port: a port, :data:`DEFAULT_PORT` (the scheme's default: 80 / 443) or
            :data:`ANY_PORT`.
    """

    host: str
    port: int

    def matches(self, url: httpx.URL) -> bool:
        """Whether ``url``'s host and port are this origin's (never port 0)."""
        port = url_port(url)
        if port <= 0 or url.host.lower() != self.host:
            return False
        if self.port == ANY_PORT:
            return True
        if self.port == DEFAULT_PORT:
            return url.port is None or url.port == _DEFAULT_PORTS.get(url.scheme)
        return port == self.port


def parse_origin(entry: str) -> Origin:
    """An allow-list entry as an :class:`Origin`: ``host`` (the default port of the URL's
    scheme), ``host:port`` or ``host:*`` (any port); IPv6 as ``[::1]:8080``.

    A name is kept as httpx reads a URL's host (:func:`_host_as_urls_read`: lower case,
    an internationalised name as its Unicode letters, ``xn--…`` or not).

    Raises:
        ValueError: an empty host, a name that is no host, a port that is not 1..65535
            or ``*``.
    """
    text = entry.strip().lower()
    host, port_text = text, ""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError(f"allow-list entry {entry!r}: unclosed '['")
        host, rest = text[1:end], text[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"allow-list entry {entry!r}: expected ':port' after ']'")
            port_text = rest[1:]
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    if not host:
        raise ValueError(f"allow-list entry {entry!r}: no host")
    if not text.startswith("["):
        host = _host_as_urls_read(entry, host)
    if not port_text:
        return Origin(host, DEFAULT_PORT)
    if port_text == "*":
        return Origin(host, ANY_PORT)
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"allow-list entry {entry!r}: the port must be 1..65535 or '*'")
    return Origin(host, int(port_text))


def _host_as_urls_read(entry: str, host: str) -> str:
    """``host`` (an allow-list entry's name or IPv4 address) as httpx reads a URL's host
    — :attr:`Origin.matches` compares it with ``url.host``: lower case, and an
    internationalised name in its Unicode form whichever way it is written (``xn--…``, the
    A-label DNS and certificates use, is read as its letters). Until 2026-12-07 the entry
    was compared as written, so an A-label entry matched no URL, its own spelling
    included.

    Raises:
        ValueError: a name that is no host — holding whitespace, an unprintable character
            or a URL delimiter, or a label IDNA refuses (``xn--zz-``).
    """
    if not host.isprintable() or _WHITESPACE.search(host) or any(c in host for c in "/?#@\\%"):
        raise ValueError(f"allow-list entry {entry!r}: not a host name")
    try:
        read = httpx.URL(f"http://{host}/").host
    except (ValueError, httpx.InvalidURL) as err:  # IDNA's refusals are ValueErrors (UnicodeError)
        raise ValueError(f"allow-list entry {entry!r}: not a host name ({err})") from None
    if not read:
        raise ValueError(f"allow-list entry {entry!r}: no host")
    return read


def origin_of(url: str) -> Origin:
    """The origin a configured URL names (its host and the port it connects to).

    Raises:
        ValueError: the URL has no host, no port can be told (an unknown scheme), or it
            is no URL at all (``httpx.InvalidURL``: a control character, a port out of
            range — until 2026-12-06 that escaped the settings' validation as a
            traceback). The message never repeats the URL, which may carry a token.
    """
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as err:
        raise ValueError(f"not a URL: {err}") from None
    port = url_port(parsed)
    if not parsed.host or not 0 < port <= 65_535:
        raise ValueError(f"{parsed.scheme}://{parsed.host}: not an http(s) URL with a host and a port (1…65535)")
    return Origin(parsed.host.lower(), port)


def parse_networks(entries: list[str]) -> tuple[IPNetwork, ...]:
    """``outbound.private_networks`` entries as networks (``127.0.0.0/8``, ``::1/128``).

    Raises:
        ValueError: an entry that is not an address or a network.
    """
    return tuple(ipaddress.ip_network(e.strip(), strict=False) for e in entries)


#: NAT64's well-known prefix (RFC 6052 §2.1): ``64:ff9b::a.b.c.d`` reaches the IPv4 host
#: ``a.b.c.d`` through the network's NAT64 gateway (DNS64 answers such addresses for an
#: IPv4-only name in an IPv6-only network).
NAT64_PREFIX = ipaddress.IPv6Network("64:ff9b::/96")
#: Networks no data destination reaches, whatever the running Python's ``is_global`` says:
#: Python 3.11 (the image's) calls each of them global. IPv6 prefixes that carry an IPv4
#: address curaflow does not translate — IPv4-compatible (``::/96``, deprecated, RFC 4291
#: §2.5.5.1), IPv4-translated (``::ffff:0:0:0/96``, RFC 2765), a local-use NAT64 prefix
#: (``64:ff9b:1::/48``, RFC 8215), 6to4 (``2002::/16``, deprecated by RFC 7526: the relay
#: is reached, not the host) —, site-local (``fec0::/10``, deprecated, still routed where
#: configured), IPv6 documentation (``3fff::/20``, RFC 9637), and the whole of the IETF's
#: ``192.0.0.0/24`` (RFC 6890; 3.11 judges only its ``/29``).
NOT_PUBLIC_NETWORKS: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "::/96",
        "::ffff:0:0:0/96",
        "64:ff9b:1::/48",
        "2002::/16",
        "fec0::/10",
        "3fff::/20",
        "192.0.0.0/24",
    )
)


def carried_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 ``address`` reaches: an IPv4-mapped address's
    (``::ffff:a.b.c.d``, through the kernel) or a NAT64 one's (:data:`NAT64_PREFIX`, through
    the network's gateway); None for any other address."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in NAT64_PREFIX:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def is_public(address: IPAddress) -> bool:
    """True for a globally routable unicast address: not loopback, private, link-local,
    site-local, multicast, reserved, unspecified, shared, documentation, nor in
    :data:`NOT_PUBLIC_NETWORKS`. An IPv6 address that reaches an IPv4 host
    (:func:`carried_ipv4`: IPv4-mapped, NAT64) is judged as that IPv4 address.

    The rule is written out rather than left to ``ipaddress.is_global`` alone, whose table
    differs between Python versions: on 3.11 a NAT64 address of ``169.254.169.254``
    (``64:ff9b::a9fe:a9fe``), ``::127.0.0.1``, ``2002:7f00:1::1`` and ``fec0::1`` were
    global, and a data destination resolving to one of them was connected to (until
    2026-12-06).
    """
    carried = carried_ipv4(address)
    if carried is not None:
        address = carried
    if any(address in net for net in NOT_PUBLIC_NETWORKS):
        return False
    if isinstance(address, ipaddress.IPv6Address) and (address.is_site_local or address.is_reserved):
        return False
    return address.is_global and not (
        address.is_multicast or address.is_private or address.is_reserved or address.is_link_local
    )


@dataclass(frozen=True)
class Destinations:
    """What one outbound client may reach.

    Attributes:
        origins: the allowed origins; a request to any other host or port is refused
            before anything is sent.
        check_addresses: data destinations: every address the host resolves to must be
            public or in ``private_networks`` (checked at connect time, by
            :class:`~curaflow.outbound.transport.GuardedBackend`).
        private_networks: non-public networks the operator allows (the embedded stack
            and the test suite run everything on 127.0.0.1).
    """

    origins: tuple[Origin, ...]
    check_addresses: bool = False
    private_networks: tuple[IPNetwork, ...] = field(default_factory=tuple)

    def allows_url(self, url: httpx.URL) -> bool:
        """Whether a request to ``url`` may be sent (scheme http(s), origin allowed, port ≠ 0)."""
        if url.scheme not in _DEFAULT_PORTS:
            return False
        return any(origin.matches(url) for origin in self.origins)

    def allows_address(self, address: IPAddress) -> bool:
        """Whether a connection to ``address`` may be opened: a public one (:func:`is_public`),
        or one in ``private_networks`` — it, or the IPv4 address it reaches
        (:func:`carried_ipv4`: a listed ``10.0.0.0/8`` allows ``64:ff9b::a00:1``)."""
        if not self.check_addresses or is_public(address):
            return True
        carried = carried_ipv4(address)
        return any(address in net or (carried is not None and carried in net) for net in self.private_networks)


def configured(*urls: str | None) -> Destinations:
    """Destinations of a client that talks only to the operator's own URLs (module doc)."""
    return Destinations(origins=tuple(origin_of(u) for u in urls if u))


def data(entries: list[str] | tuple[Origin, ...], private_networks: tuple[IPNetwork, ...]) -> Destinations:
    """Destinations of a client whose URLs come from data: an allow-list, addresses checked."""
    origins = tuple(e if isinstance(e, Origin) else parse_origin(e) for e in entries)
    return Destinations(origins=origins, check_addresses=True, private_networks=private_networks)
