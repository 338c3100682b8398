"""What a refused Temporal connection is said to mean (``curaflow.temporal.connection.refusal_hint``)."""

from __future__ import annotations

import pytest

from curaflow.temporal.connection import refusal_hint

NO_CERT = "tls=on mtls=off api_key=off"

#: The SDK's words for a server that resets a client without a certificate, as seen.
RESETS = [
    "Failed client connect: Server connection error: tonic::transport::Error(Transport, ConnectionReset)",
    "Failed client connect: `get_system_info` call error after connection: Status { code: Cancelled, message: "
    '"operation was canceled", source: Some(tonic::transport::Error(Transport, hyper::Error(Canceled, '
    '"connection closed"))) }',
    "Failed client connect: Server connection error: tonic::transport::Error(Transport, hyper::Error(Io, Custom "
    '{ kind: UnexpectedEof, error: "tls handshake eof" }))',
]


@pytest.mark.parametrize("error", RESETS)
def test_a_reset_without_a_client_certificate_names_the_certificate_settings(error: str) -> None:
    hint = refusal_hint(error, NO_CERT)
    assert hint is not None and "TEMPORAL_TLS_CLIENT_CERT_PATH" in hint


def test_a_refused_connection_without_tls_asks_whether_tls_is_expected() -> None:
    hint = refusal_hint(RESETS[1], "tls=off mtls=off api_key=off")
    assert hint is not None and "TEMPORAL_TLS=true" in hint


def test_an_unrelated_error_gets_no_hint() -> None:
    assert refusal_hint("Failed client connect: dns error: failed to lookup address", NO_CERT) is None
