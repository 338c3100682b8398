"""A webhook receiver's 2xx ``status`` word: a delivery only when it says the receiver has it.

Reference ``pixiv-and-delivery-apis.md`` §4.1 (the original's webhook route): "2xx +
explicit success word → delivered; 2xx with ``pending/queued/submitted`` → retry with the
same key; ``failed/rejected`` → terminal failure even on 2xx; unknown 2xx word → retry".
Until 2026-12-07 every word curaflow did not know — ``submitted``, the reference's own
word for a receiver holding the delivery, or any new one — was recorded delivered for
good, and a word with blanks around it (``"rejected "``) or in another Unicode case was
not read at all: the work reported delivered though the receiver said otherwise.

The project's rule ("the unknown is cheap"): a word never seen costs one attempt on the
route — the receiver's "pending" path: ambiguous, retried under the same ``webhook-id``
(the receiver dedupes on it) — never the work nor the route. A 2xx that says nothing (no
body, a body not JSON, no ``status``) is still a plain ``200 OK``: delivered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from curaflow.domain.reasons import Owner, TerminalReason
from curaflow.domain.verdicts import delivery_verdict
from curaflow.routes.base import DeliveryReceipt
from tests.unit.test_route_answers import deliver, failure, webhook


def answering(status: int, **kw: Any) -> Any:
    return lambda _r: httpx.Response(status, **kw)


@pytest.mark.parametrize(
    "word",
    ["submitted", "Submitted", "processing", "in_progress", "later", "weird new word", "", "   ", "accepted?", "okay"],
)
async def test_a_2xx_word_curaflow_does_not_know_costs_one_attempt_retried_under_the_same_webhook_id(
    tmp_path: Path, word: str
) -> None:
    err = await failure(webhook, answering(200, json={"status": word, "id": "r-1"}), tmp_path)
    assert err.reason == TerminalReason.DELIVERY_FAILED and not err.permanent, str(err)
    assert err.ambiguous, "the receiver may have it: retried with the same webhook-id, possibly delivered"
    verdict = delivery_verdict(
        reason=err.reason, permanent=err.permanent, ambiguous=err.ambiguous, resend_safe=True, attempt=1, max_attempts=5
    )
    assert not verdict.final and verdict.owner == Owner.ROUTE, verdict


@pytest.mark.parametrize("value", [True, False, 0, 500, 404, 2.5, [], {}, ["accepted"], {"code": "accepted"}])
async def test_a_status_that_is_no_word_is_an_answer_never_seen(tmp_path: Path, value: Any) -> None:
    # `{"status": true}`, `{"status": 500}`, an object: the receiver said something in the
    # status curaflow cannot read as any of its words — one attempt, not a delivery.
    err = await failure(webhook, answering(200, json={"status": value}), tmp_path)
    assert err.ambiguous and not err.permanent and err.reason == TerminalReason.DELIVERY_FAILED, str(err)


@pytest.mark.parametrize(
    ("word", "reason", "ambiguous"),
    [
        ("rejected ", TerminalReason.DELIVERY_REJECTED, False),
        ("\tREJECTED\n", TerminalReason.DELIVERY_REJECTED, False),
        ("Rejected", TerminalReason.DELIVERY_REJECTED, False),
        (" failed", TerminalReason.ROUTE_REFUSED, False),
        ("Error ", TerminalReason.ROUTE_REFUSED, False),
        (" PENDING ", TerminalReason.DELIVERY_FAILED, True),
        ("Queued\u00a0", TerminalReason.DELIVERY_FAILED, True),
    ],
)
async def test_a_word_is_read_whatever_its_case_and_the_blanks_around_it(
    tmp_path: Path, word: str, reason: TerminalReason, ambiguous: bool
) -> None:
    err = await failure(webhook, answering(200, json={"status": word}), tmp_path)
    assert err.reason == reason and err.ambiguous is ambiguous, (word, err.reason, str(err))


@pytest.mark.parametrize(
    "word",
    ["accepted", "Accepted ", "ok", "OK", "success", "succeeded", "delivered", "received", "created", "done",
     "processed", "completed", "stored", "idempotent_replay", 200, 201, 202, "204"],
)  # fmt: skip
async def test_a_word_that_says_the_receiver_has_it_is_a_delivery(tmp_path: Path, word: Any) -> None:
    receipt = await deliver(webhook, answering(202, json={"status": word, "id": "r-9"}), tmp_path)
    assert isinstance(receipt, DeliveryReceipt) and not receipt.duplicate and receipt.remote_id == "r-9", receipt


@pytest.mark.parametrize("word", ["duplicate", "duplicate_existing", " Duplicate_Existing"])
async def test_a_word_that_says_the_receiver_already_had_it_is_a_duplicate(tmp_path: Path, word: str) -> None:
    # As a 409 (reference §1.3: the receiver's `duplicate_existing` → the ledger's `duplicate`).
    receipt = await deliver(webhook, answering(200, json={"status": word}), tmp_path)
    assert isinstance(receipt, DeliveryReceipt) and receipt.duplicate, receipt


@pytest.mark.parametrize(
    "answer",
    [
        {},
        {"content": b""},
        {"text": "OK"},
        {"text": "submitted", "headers": {"content-type": "text/plain"}},
        {"json": {"id": "r-2"}},
        {"json": {"status": None, "id": "r-2"}},
        {"json": ["submitted"]},
        {"json": "submitted"},
        {"content": b'{"status": "submitted"', "headers": {"content-type": "application/json"}},  # not JSON
    ],
    ids=["no-body", "empty", "text", "text-word", "no-status", "null-status", "list", "string", "not-json"],
)
async def test_a_2xx_that_says_nothing_is_still_a_delivery(tmp_path: Path, answer: dict[str, Any]) -> None:
    # A plain `200 OK` receiver (the receiver contract: a 2xx is delivered unless its JSON
    # says otherwise) — its body is not read for a word it does not have.
    receipt = await deliver(webhook, answering(200, **answer), tmp_path)
    assert isinstance(receipt, DeliveryReceipt) and not receipt.duplicate, receipt
