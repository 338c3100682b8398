"""An expected failure reaches Temporal within the size Temporal keeps of an activity's last
failure.

Temporal keeps a retrying activity's last failure in the run's mutable state only up to a
size (``limit.mutableStateActivityFailureSizeLimitError``, 4 KiB by default; a warning
past 2 KiB) and shows anything larger as "Failure exceeds size limit." — what `curaflow run`
printed, and the Temporal UI showed, for a search retrying against a Pixiv it could not
reach (2026-12-07): the `ApplicationError` is raised ``from`` the source's error, raised from
httpx's, from httpcore's, from the socket's, each cause with its stack trace.
"""

from __future__ import annotations

import socket

import httpx
import pytest
from temporalio.api.failure.v1 import Failure
from temporalio.exceptions import ApplicationError

from activities.errors import source_failure
from curaflow.domain.reasons import TerminalReason
from curaflow.domain.verdicts.failures import attempt_detail
from curaflow.sources.errors import SourceError
from curaflow.temporal.connection import DATA_CONVERTER, FAILURE_BYTES


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _deep(n: int, url: str) -> None:
    if n:
        await _deep(n - 1, url)
        return
    async with httpx.AsyncClient() as http:
        await http.get(url)


async def a_search_that_cannot_reach_pixiv() -> ApplicationError:
    """The failure the search step raises for a Pixiv it cannot connect to, as it raises it."""
    try:
        try:
            await _deep(20, f"http://127.0.0.1:{closed_port()}/auth/token")
        except httpx.HTTPError as err:
            raise SourceError(TerminalReason.NETWORK_ERROR, f"pixiv auth: {type(err).__name__}") from err
    except SourceError as err:
        try:
            failure = source_failure(err, 3)
            raise ApplicationError(
                failure.message, attempt_detail(3), type=failure.type, next_retry_delay=failure.next_retry_delay
            ) from err
        except ApplicationError as raised:
            return raised
    raise AssertionError("unreachable")


def encoded(err: BaseException) -> Failure:
    failure = Failure()
    DATA_CONVERTER.failure_converter.to_failure(err, DATA_CONVERTER.payload_converter, failure)
    return failure


async def test_a_source_failure_with_its_causes_fits_what_temporal_keeps_of_it() -> None:
    err = await a_search_that_cannot_reach_pixiv()
    assert err.__cause__ is not None and err.__cause__.__cause__ is not None  # the chain as raised
    failure = encoded(err)
    assert failure.ByteSize() <= FAILURE_BYTES <= 2048, failure.ByteSize()
    # what an operator and the workflow read of it stays whole
    assert failure.message == "pixiv auth: ConnectError"
    assert failure.application_failure_info.type == "network_error"
    assert len(failure.application_failure_info.details.payloads) == 1
    # the causes are named, outermost first, as far as they fit
    assert failure.cause.message.startswith("pixiv auth: ConnectError")


@pytest.mark.parametrize("size", [100, 3000, 20_000])
def test_a_long_message_of_its_own_is_cut_with_a_mark_and_its_type_kept(size: int) -> None:
    err = ApplicationError("x" * size, type="route_refused", non_retryable=True)
    failure = encoded(err)
    assert failure.ByteSize() <= FAILURE_BYTES
    assert failure.application_failure_info.type == "route_refused"
    assert failure.application_failure_info.non_retryable
    if size <= 1000:
        assert failure.message == "x" * size
    else:
        assert failure.message.startswith("x" * 500) and failure.message.endswith("…")


def test_a_bug_is_handed_on_whole() -> None:
    """Only an expected failure (an ``ApplicationError``) is fitted: a bug's words and trace
    are what find it, whatever their size (its last attempt's event in the history keeps
    them)."""
    try:
        raise KeyError("cell " * 1000)
    except KeyError as err:
        failure = encoded(err)
    assert failure.ByteSize() > FAILURE_BYTES
    assert failure.message.count("cell") == 1000
    assert "raise KeyError" in failure.stack_trace
