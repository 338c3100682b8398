"""What a push records for an answer that is not the consumer's receiver's own (``push_events``).

A consumer's callback host may sit behind Cloudflare, whose edge answers some requests
itself without handing them to the receiver. Each case runs the ``push_events`` activity
(the real outbound client on the callback allow-list, the real ledger) against a receiver
on 127.0.0.1 that answers as Cloudflare's edge does, and reads what the ledger kept.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from temporalio.exceptions import ApplicationError

from activities.deps import close_deps, open_deps
from activities.push_events import PushActivity
from curaflow.domain.messages import CallbackPolicy, PushInput
from curaflow.ledger import event_pushes
from tests.conftest import StackFactory
from tests.fakes.hostile import Behaviour, HostileParty
from tests.support import job_env, job_owing_pushes, push_config

pytestmark = pytest.mark.integration

#: Headers Cloudflare's edge writes on every answer it gives (its own or the origin's).
CLOUDFLARE = (("server", "cloudflare"), ("cf-ray", "8f2c1a2b3c4d5e6f-FRA"))


async def push_once(stack_settings: Any, job_id: str) -> ApplicationError | None:
    """One ``push_events`` attempt of ``job_id``; the retry it asked for, if any."""
    deps = await open_deps(stack_settings, None)
    try:
        await job_env(job_id).run(
            PushActivity(deps).push_events, PushInput(job_id=job_id, policy=CallbackPolicy(timeout_ms=10_000))
        )
    except ApplicationError as err:
        return err
    finally:
        await close_deps(deps)
    return None


async def push_answered(
    make_stack: StackFactory, tmp_path: Path, pool: asyncpg.Pool, answer: Behaviour
) -> tuple[str, list[asyncpg.Record], ApplicationError | None]:
    """One ``push_events`` attempt of a job's one pending event to a receiver that answers
    ``answer``: the job id, the ledger's rows of its pushes, the retry it asked for."""
    party = await HostileParty(default=answer).start()
    stack = make_stack(push_config(tmp_path))
    try:
        job_id = await job_owing_pushes(pool, f"{party.url}/hook", label="edge")
        retry = await push_once(stack.settings, job_id)
    finally:
        await party.stop()
    return job_id, await event_pushes.push_states(pool, job_id), retry


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        pytest.param(b"error code: 1001", (), id="text"),
        pytest.param(
            b'<html><body><span class="cf-error-code">1001</span> DNS resolution error</body></html>',
            (("content-type", "text/html"),),
            id="html",
        ),
        pytest.param(gzip.compress(b"error code: 1001"), (("content-encoding", "gzip"),), id="gzip"),
    ],
)
async def test_cloudflares_own_409_page_is_never_a_delivered_push(
    make_stack: StackFactory, tmp_path: Path, ledger_pool: asyncpg.Pool, body: bytes, headers: tuple[Any, ...]
) -> None:
    # Cloudflare answers 409 with its 1xxx page "error code: 1001" (DNS resolution error)
    # when it cannot resolve the receiver's host: the request never reached the receiver
    # (the routes' reading, curaflow.routes.base.cloudflare_error). A push so answered is
    # one retried attempt — it was recorded delivered (a 409 is the receiver's "already
    # recorded"), the consumer never had the event and the ledger said it had.
    job_id, rows, retry = await push_answered(
        make_stack, tmp_path, ledger_pool, Behaviour("ok", status=409, body=body, headers=CLOUDFLARE + headers)
    )
    assert [(r["status"], r["last_status"]) for r in rows] == [(event_pushes.PENDING, 409)], rows
    assert retry is not None and retry.type == "callback_failed"
    assert "Cloudflare" in rows[0]["last_error"] and "1001" in rows[0]["last_error"], rows[0]["last_error"]
    # owed no more: the session's other workers' sweepers would push it to a receiver gone
    await ledger_pool.execute("UPDATE event_pushes SET status = 'dead' WHERE job_id = $1", job_id)


async def test_the_receivers_own_409_through_cloudflare_is_delivered(
    make_stack: StackFactory, tmp_path: Path, ledger_pool: asyncpg.Pool
) -> None:
    # The receiver's own "already recorded", served through Cloudflare (its headers, the
    # receiver's body): delivered, as a 409 is.
    _, rows, retry = await push_answered(
        make_stack,
        tmp_path,
        ledger_pool,
        Behaviour("ok", status=409, body=b'{"error": "duplicate"}', headers=CLOUDFLARE),
    )
    assert [(r["status"], r["last_status"]) for r in rows] == [(event_pushes.DELIVERED, 409)], rows
    assert retry is None
