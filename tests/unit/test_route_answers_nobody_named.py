"""Routes' answers nobody named before 2026-12-07, each probed at the default it fell to.

The project's rule (DESIGN.md "Safe defaults at the edges: the delivery side"): an answer
curaflow does not recognise costs one attempt, never a work, a target or an account; only
what lets a route blame the work is recognised positively. Each case below broke it:

* Discord's ``50035`` Invalid Form Body naming ``content`` or ``attachments`` refused the
  work for good — but both are curaflow's own composition (the caption built from the
  title, author, URL and tags under ``content_max`` ≤ 2000 characters; the attachment list
  of curaflow's file names): a form error on them is curaflow's or the route's doing,
  never the work's (Telegram's "message caption is too long" was already the route's);
* a webhook receiver answering ``303 See Other`` to the POST was the route's refusal —
  the work then offered to a later job under another ``webhook-id``, though RFC 9110
  §15.4.4 reads a 303 as the POST's result found elsewhere (the receiver may have it);
* a webhook receiver's 2xx saying it holds the delivery (``pending``) with a
  ``Retry-After`` was asked again on Temporal's backoff, its stated wait ignored.

The routes run against ``httpx.MockTransport`` answering the platforms' wire formats
(:mod:`tests.unit.test_route_answers`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curaflow.domain.models import Work
from curaflow.domain.reasons import Owner, TerminalReason
from curaflow.domain.verdicts import delivery_verdict, owner_of
from curaflow.routes.caption import build_caption, escape_markdown, utf16_len
from curaflow.routes.webhook import leaves_origin
from tests.unit.test_route_answers import deliver, discord, failure, is_the_routes, webhook

# ---- Discord: a form error on what curaflow composed is never the work's ----------------------


def form_error(errors: dict[str, Any]) -> dict[str, Any]:
    return {"code": 50035, "message": "Invalid Form Body", "errors": errors}


CURAFLOWS_FIELDS = {
    # Discord's answer to a content over its limit (docs "Create Message": content up to
    # 2000 characters) — curaflow builds the caption under `content_max` ≤ 2000.
    "content-length": {
        "content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}]}
    },
    "content-other": {"content": {"_errors": [{"code": "CONTENT_INVALID", "message": "Invalid content"}]}},
    "attachment-filename": {
        "attachments": {"0": {"filename": {"_errors": [{"code": "BASE_TYPE_BAD_LENGTH", "message": "bad"}]}}}
    },
    "attachments": {"attachments": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH", "message": "Too many"}]}},
    "content-and-file": {
        "content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}]},
        "files[0]": {"_errors": [{"code": "BINARY_TYPE_MAX_SIZE", "message": "File cannot be larger than 10 MB."}]},
    },
}


@pytest.mark.parametrize("status", [400, 403, 413])
@pytest.mark.parametrize("errors", list(CURAFLOWS_FIELDS))
async def test_a_discord_form_error_on_what_curaflow_composed_is_the_routes(
    tmp_path: Path, errors: str, status: int
) -> None:
    err = await failure(discord, lambda _r: httpx.Response(status, json=form_error(CURAFLOWS_FIELDS[errors])), tmp_path)
    assert is_the_routes(err), (err.reason, str(err))
    verdict = delivery_verdict(
        reason=err.reason,
        permanent=err.permanent,
        ambiguous=err.ambiguous,
        resend_safe=False,
        attempt=1,
        max_attempts=5,
    )
    assert not verdict.remember_refusal
    assert err.answer is not None  # counted in the route's streak: a page if it lasts
    assert "curaflow composed" in str(err) and "content_max" in str(err)


async def test_a_discord_form_error_on_the_files_alone_is_still_the_works(tmp_path: Path) -> None:
    # The pages' bytes are the work's (a file over the server's size, as 50045).
    body = form_error({"files[0]": {"_errors": [{"code": "BINARY_TYPE_MAX_SIZE", "message": "File too large"}]}})
    err = await failure(discord, lambda _r: httpx.Response(400, json=body), tmp_path)
    assert err.reason == TerminalReason.DELIVERY_REJECTED and owner_of(err.reason) == Owner.WORK


TEXTS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=3000)
MARKDOWN_HEAVY = st.text(st.sampled_from("*_~`|>#-[]()<:\\ \n\u202e\U0001f600e\u0301"), max_size=3000)


@settings(max_examples=150, deadline=None)
@given(
    title=st.one_of(TEXTS, MARKDOWN_HEAVY),
    author=st.one_of(st.none(), TEXTS, MARKDOWN_HEAVY),
    tags=st.lists(st.one_of(TEXTS, MARKDOWN_HEAVY), max_size=60),
    limit=st.integers(0, 2000),
    part=st.one_of(st.none(), st.tuples(st.integers(1, 200), st.integers(1, 200))),
)
def test_curaflow_never_composes_a_chat_caption_over_its_limit(
    title: str, author: str | None, tags: list[str], limit: int, part: tuple[int, int] | None
) -> None:
    """What the route sends as ``content`` is within ``content_max`` (≤ 2000, Discord's
    limit, in code points as Discord counts) whatever the work's text — escaped Markdown
    included —, so Discord's "Must be 2000 or fewer in length" is an answer curaflow should
    never meet: the route's when it comes."""
    work = Work(
        work_id="4242",
        title=title,
        author=author,
        tags=tags,
        url="https://www.pixiv.net/artworks/4242",
        page_count=1,
    )
    content = build_caption(work, limit, part=part, escape=escape_markdown)
    assert len(content) <= limit
    # Telegram's caption likewise, in the UTF-16 units it is held to (1024 at most):
    # "message caption is too long" is the route's, an answer curaflow should never meet.
    caption = build_caption(work, min(limit, 1024), measure=utf16_len, part=part)
    assert utf16_len(caption) <= min(limit, 1024)


# ---- webhook: 303 See Other to the POST -----------------------------------------------------


async def test_a_webhook_303_may_follow_the_post_one_attempt_never_a_refusal(tmp_path: Path) -> None:
    """RFC 9110 §15.4.4: a 303 is "an indirect response to the original request" — the
    receiver may have processed the POST and points at its result (never followed: it
    names a destination nobody checked). One attempt, retried with the same
    ``webhook-id`` (the receiver deduplicates), possibly delivered; its stated
    ``Retry-After`` waited (RFC 9110 §10.2.3 names it for any 3xx)."""
    err = await failure(
        webhook,
        lambda _r: httpx.Response(303, headers={"location": "https://hook.test/result/1", "retry-after": "30"}),
        tmp_path,
    )
    assert err.reason == TerminalReason.DELIVERY_FAILED and owner_of(err.reason) == Owner.ROUTE
    assert err.ambiguous and not err.permanent and not err.rate_limited, str(err)
    assert err.retry_after_s == 30
    assert (
        err.answer is not None and "303" in err.answer
    )  # an answer of the receiver's: a 303 to every work pauses the route
    verdict = delivery_verdict(
        reason=err.reason, permanent=err.permanent, ambiguous=err.ambiguous, resend_safe=True, attempt=1, max_attempts=5
    )
    assert not verdict.final and not verdict.remember_refusal


AUTH_PORTALS = {
    # Authelia's forward auth answers a request it will not let through 303 when its method
    # is not GET / HEAD (authelia/authelia #2184, 2021): every POST of a webhook whose url
    # sits behind it, the portal on its own host, the url asked back in `rd`.
    "authelia": "https://auth.hook.test/?rd=https%3A%2F%2Fhook.test%2Fin&rm=POST",
    "another-port": "https://hook.test:8443/login",
    "another-scheme": "http://hook.test/result/1",
}


@pytest.mark.parametrize("location", list(AUTH_PORTALS.values()), ids=list(AUTH_PORTALS))
async def test_a_webhook_303_to_another_origin_is_the_routes_refusal_never_possibly_delivered(
    tmp_path: Path, location: str
) -> None:
    """A 303 pointing off the receiver's origin points at no result of the receiver's: a
    server in front of it (an authentication portal) took the POST instead — nothing was
    delivered. The route's refusal, as before 2026-12-07: the work held back (lifted by
    the route's pause), never held on the route for good as possibly delivered. Until then
    (since the same day) every work a webhook behind Authelia was sent ran out of attempts
    "possibly delivered" — kept from the route for good, never lifted by its pause."""
    err = await failure(webhook, lambda _r: httpx.Response(303, headers={"location": location}), tmp_path)
    assert is_the_routes(err) and not err.ambiguous, str(err)
    assert err.answer is not None and "303" in err.answer
    assert "another origin" in str(err), str(err)


@pytest.mark.parametrize("location", ["/result/1", "https://HOOK.test:443/result/1", "result/1", None])
async def test_a_webhook_303_on_the_receivers_own_origin_or_none_stays_possibly_delivered(
    tmp_path: Path, location: str | None
) -> None:
    headers = {"location": location} if location is not None else {}
    err = await failure(webhook, lambda _r: httpx.Response(303, headers=headers), tmp_path)
    assert err.reason == TerminalReason.DELIVERY_FAILED and err.ambiguous and not err.permanent, str(err)


@pytest.mark.parametrize(
    ("url", "location"),
    [
        ("http://[::1]:8080/in", "http://[0:0::1]:8080/result/1"),
        ("http://[::1]:8080/in", "http://[::0001]:8080/result/1"),
        ("http://[2001:db8::7]/in", "HTTP://[2001:DB8:0:0:0:0:0:7]/result/1"),
        ("http://[2001:db8:0::7]:80/in", "http://[2001:db8::7]/result/1"),
    ],
)
def test_a_303_to_the_receivers_own_address_written_otherwise_stays_on_its_origin(url: str, location: str) -> None:
    # An origin's host is its IP address in one canonical form (WHATWG URL): httpx keeps an
    # IPv6 literal as written, and a receiver's 303 to its own address written otherwise
    # was read as leaving its origin — the route's refusal, a work it may hold sent again.
    assert not leaves_origin(location, url)


@pytest.mark.parametrize(
    ("location", "leaves"),
    [
        ("\\\\evil.example/x", True),  # \\evil.example/x: a browser reads //evil.example/x
        ("/\\evil.example/x", True),
        ("\\/evil.example/x", True),
        ("/\t/evil.example/x", True),  # a tab or newline is dropped wherever it is written
        ("/\n/evil.example/x", True),
        ("https:\\\\evil.example/x", True),
        ("\\result\\1", False),  # a path on the receiver's host, written with backslashes
        ("/result?next=\\\\evil.example", False),  # a query's backslashes are the query's
    ],
)
def test_a_303_location_is_read_as_a_browser_reads_it(location: str, leaves: bool) -> None:
    # A Location of an http(s) URL is read by the WHATWG URL Standard — a backslash is a
    # slash, a tab or a newline is dropped —: \\evil.example/x names another host, which
    # httpx read as a path of the receiver's own (the route's 303 held the work as maybe
    # delivered behind an authentication portal, then sent it again under another id).
    assert leaves_origin(location, "https://hook.test/in") is leaves


@pytest.mark.parametrize("location", ["https://xn--ls8h.la/x", "//xn--hook-.test/x"])
def test_a_303_location_whose_host_cannot_be_decoded_leaves_no_origin(location: str) -> None:
    # httpx decodes an xn-- host (IDNA) only when it is read: leaves_origin read it past
    # its guard and raised idna.IDNAError, an exception of no reading's (internal_error).
    assert not leaves_origin(location, "https://hook.test/in")


@pytest.mark.parametrize("status", [300, 301, 302, 304, 307, 308])
async def test_a_webhook_redirect_that_says_the_post_was_not_processed_stays_the_routes(
    tmp_path: Path, status: int
) -> None:
    # 307 / 308 (and 301 / 302): "repeat the request at another URI" — not processed, the
    # route's url is wrong: the route's refusal, the work held back, never used up.
    err = await failure(webhook, lambda _r: httpx.Response(status, headers={"location": "https://x.test/"}), tmp_path)
    assert is_the_routes(err) and not err.ambiguous


# ---- webhook: a 2xx that holds the delivery, with Retry-After --------------------------------


@pytest.mark.parametrize("word", ["pending", "queued", "submitted", "in_progress"])
@pytest.mark.parametrize("status", [200, 202])
async def test_a_webhook_2xx_holding_the_delivery_waits_its_stated_retry_after(
    tmp_path: Path, status: int, word: str
) -> None:
    err = await failure(
        webhook, lambda _r: httpx.Response(status, json={"status": word}, headers={"retry-after": "120"}), tmp_path
    )
    assert err.ambiguous and not err.permanent and not err.rate_limited
    assert err.retry_after_s == 120, err.retry_after_s


async def test_a_webhook_2xx_holding_the_delivery_without_retry_after_states_no_delay(tmp_path: Path) -> None:
    err = await failure(webhook, lambda _r: httpx.Response(202, json={"status": "pending"}), tmp_path)
    assert err.ambiguous and err.retry_after_s is None


@pytest.mark.parametrize("body", [None, {"status": "accepted"}, {}])
async def test_a_webhook_202_saying_it_has_it_is_a_delivery_whatever_its_retry_after(tmp_path: Path, body: Any) -> None:
    # The contract: a 2xx with no word, or one saying the receiver has it, is delivered.
    def answer(_r: httpx.Request) -> httpx.Response:
        if body is None:
            return httpx.Response(202, headers={"retry-after": "60"})
        return httpx.Response(202, json=body, headers={"retry-after": "60"})

    receipt = await deliver(webhook, answer, tmp_path)
    assert not receipt.duplicate and receipt.remote_status == "202"


@pytest.mark.parametrize("status", [400, 403])
async def test_discords_automod_blocking_a_title_curaflow_never_sends_is_the_routes(
    tmp_path: Path, status: int
) -> None:
    """``200001`` is automatic moderation blocking a *title* (docs "JSON Error Codes": "Title
    was blocked by automatic moderation" — a forum post's ``thread_name``). curaflow sends
    no title (it posts into ``thread_id``'s thread or the channel), so the answer is about
    the route's channel, never the work: the route's, as an error on ``embeds`` is. Until
    2026-12-07 it refused the work for good. (``200000``, the *message* blocked — the
    work's title and tags in the caption —, stays the work's.)"""
    body = {"code": 200001, "message": "Title was blocked by automatic moderation"}
    err = await failure(discord, lambda _r: httpx.Response(status, json=body), tmp_path)
    assert is_the_routes(err), (err.reason, str(err))
