"""The suite's default httpx clients share one TLS context per thread and environment
(``tests/conftest.py`` :func:`share_default_tls_context`), and nothing else changes: a
client given its own ``verify`` keeps it, and another CA bundle in the environment gets
a context of its own."""

from __future__ import annotations

import ssl
import threading
from pathlib import Path

import certifi
import httpx
import pytest


def _context(client: httpx.AsyncClient) -> ssl.SSLContext:
    context: ssl.SSLContext = client._transport._pool._ssl_context  # type: ignore[attr-defined]
    return context


def test_default_clients_share_one_context_on_a_thread_and_verify_as_httpx_does() -> None:
    first, second = httpx.AsyncClient(), httpx.AsyncClient()
    assert _context(first) is _context(second)
    assert _context(first).verify_mode == ssl.CERT_REQUIRED and _context(first).check_hostname
    other: list[ssl.SSLContext] = []
    thread = threading.Thread(target=lambda: other.append(_context(httpx.AsyncClient())))
    thread.start()
    thread.join()
    assert other[0] is not _context(first)  # one per thread: httpcore sets ALPN before each handshake


def test_a_clients_own_verify_and_another_bundle_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = ssl.create_default_context()
    assert _context(httpx.AsyncClient(verify=own)) is own
    assert _context(httpx.AsyncClient(verify=False)).verify_mode == ssl.CERT_NONE
    default = _context(httpx.AsyncClient())
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(Path(certifi.where()).read_bytes())
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    assert _context(httpx.AsyncClient()) is not default
    assert _context(httpx.AsyncClient(trust_env=False)) is not _context(httpx.AsyncClient())
