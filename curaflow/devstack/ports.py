"""Free TCP ports for the embedded stack's children (dev server, workers' metrics, tests).

A port found by binding port 0 comes from the kernel's ephemeral range — the same range
the kernel draws from for every outgoing connection's local port. Between finding it and
the child binding it (seconds, when the child is a Python process importing its modules),
an outgoing connection of any process on the machine may take it, and the child then
fails with "Address already in use" (seen: a worker's metrics port taken during a busy
test run). :func:`free_port` therefore picks ports *outside* the ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range`` on Linux; 32768–60999 by default), where only
another listener can take it, and never hands the same port twice in one process.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

# Below this, ports belong to well-known and registered services; never chosen.
_FLOOR = 10_000
_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_DEFAULT_EPHEMERAL = (32_768, 60_999)  # Linux's default, used when the file cannot be read
_TRIES = 200
_handed: set[int] = set()
_random = random.SystemRandom()


def ephemeral_range(source: Path = _RANGE_FILE) -> tuple[int, int]:
    """The kernel's ephemeral port range ``(low, high)``, inclusive.

    Read from ``source`` (Linux: ``/proc/sys/net/ipv4/ip_local_port_range``); Linux's
    default ``(32768, 60999)`` when it is missing or unreadable.
    """
    try:
        low, high = (int(part) for part in source.read_text().split()[:2])
    except (OSError, ValueError):
        return _DEFAULT_EPHEMERAL
    return (low, high) if 0 < low <= high <= 65_535 else _DEFAULT_EPHEMERAL


def _bindable(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that is free now and outside the ephemeral range.

    Chosen at random among ports ≥ 10000 below or above the kernel's ephemeral range (so
    no outgoing connection can take it before its listener binds), checked by binding it
    (without ``SO_REUSEADDR``), and never returned twice by one process. Falls back to a
    port the kernel picks (``bind`` to port 0) when no such port is found in 200 tries.
    """
    low, high = ephemeral_range()
    pools = [(lo, hi) for lo, hi in ((_FLOOR, low - 1), (max(high + 1, _FLOOR), 65_535)) if lo <= hi]
    sizes = [hi - lo + 1 for lo, hi in pools]
    for _ in range(_TRIES if pools else 0):
        lo, hi = _random.choices(pools, weights=sizes)[0]
        port = _random.randint(lo, hi)
        if port not in _handed and _bindable(host, port):
            _handed.add(port)
            return port
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port = int(sock.getsockname()[1])
    _handed.add(port)
    return port
