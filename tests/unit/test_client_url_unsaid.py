"""The library client never says the password of the API URL it was given.

``CuraflowClient("http://user:password@host:port")`` — a library user's URL through a proxy
that asks for HTTP Basic — said ``cannot reach http://user:password@…`` when the API could
not be reached, the password whole in the exception a caller logs (the command line refuses
such a URL since 2026-12-07, `curaflow.cli.jobs.api_url_problem`; the library takes it).
"""

from __future__ import annotations

import socket

import pytest

from curaflow.client import ApiUnreachable, CuraflowClient


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("userinfo", ["curaflow:Pr0xy-Passw0rd-9@", "Pr0xy-Passw0rd-9@", "u:Pr0xy%40Passw0rd-9@"])
async def test_an_unreachable_api_is_named_without_the_urls_user_information(userinfo: str) -> None:
    port = closed_port()
    async with CuraflowClient(f"http://{userinfo}127.0.0.1:{port}", timeout_s=2) as client:
        with pytest.raises(ApiUnreachable) as raised:
            await client.capabilities()
    said = str(raised.value)
    assert f"127.0.0.1:{port}" in said  # the API is still named
    assert "Passw0rd" not in said and "curaflow:" not in said, said
