"""Ports handed to the stack's children lie outside the kernel's ephemeral range.

A CI run failed because a worker's metrics port, found by binding port 0, was taken by an
outgoing connection's local port before the worker bound it ("Address already in use").
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from curaflow.devstack import ports
from curaflow.devstack.ports import ephemeral_range, free_port


def test_free_ports_are_outside_the_ephemeral_range_free_and_never_repeated() -> None:
    low, high = ephemeral_range()
    handed = [free_port() for _ in range(50)]
    assert len(set(handed)) == len(handed)
    for port in handed:
        assert port >= 10_000
        assert not low <= port <= high, f"{port} is in the ephemeral range {low}-{high}"
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # still free: nothing listens on it


def test_the_ephemeral_range_is_read_from_the_kernel_and_defaults_when_unreadable(tmp_path: Path) -> None:
    custom = tmp_path / "range"
    custom.write_text("20000\t30000\n")
    assert ephemeral_range(custom) == (20_000, 30_000)
    assert ephemeral_range(tmp_path / "missing") == (32_768, 60_999)
    custom.write_text("garbage")
    assert ephemeral_range(custom) == (32_768, 60_999)


def test_a_port_that_is_taken_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_port()))
        busy = int(taken.getsockname()[1])
        chosen = iter([busy, busy])
        monkeypatch.setattr(ports._random, "randint", lambda lo, hi: next(chosen, lo + 7))
        port = free_port()
        assert port != busy
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
