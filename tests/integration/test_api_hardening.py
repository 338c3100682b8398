"""Inputs that used to get a 500, and job ids that collide with the sub-routes.

Every answer here also passes the schema check of :meth:`tests.support.Stack.start_api`.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import uuid
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from curaflow.api.errors import install_error_handlers
from tests.conftest import StackFactory
from tests.support import API_TOKEN, short_id, whsec

pytestmark = pytest.mark.integration


def config(tmp_path: Path) -> dict[str, object]:
    out = f"out-{short_id()}"
    return {
        "api": {"callback_allowed_hosts": ["127.0.0.1:*"], "callback_secret": whsec()},
        "routes": {out: {"kind": "directory", "path": str(tmp_path / "out")}},
        "targets": [{"id": "demo", "routes": [out]}],
    }


def raw_task(key_json: str, params_json: str = '{"query": {"tags": ["a"]}}', extra: str = "") -> bytes:
    return (
        '{"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": '
        + key_json
        + ', "params": '
        + params_json
        + extra
        + "}"
    ).encode()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (raw_task('"k-\\ud800"'), "idempotency_key"),
        (raw_task('"k-1"', '{"query": {"tags": ["\\udfff"]}}'), "params.query.tags"),
        (raw_task('"k-2"', extra=', "correlation_id": "\\ud800"'), "correlation_id"),
        (raw_task('"k-3"', extra=', "labels": {"a": "\\ud800"}'), "labels"),
        (raw_task('"k-4"', '{"target_id": "\\ud800"}'), "params.target_id"),
        (raw_task('"k-5"', extra=', "callback_url": "http://127.0.0.1:99999/x"'), "callback_url"),
        (raw_task('"k-6"', extra=', "callback_url": "http://[::1/x"'), "callback_url"),
    ],
)
async def test_unstorable_or_malformed_values_are_refused(
    make_stack: StackFactory, tmp_path: Path, body: bytes, field: str
) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    pool = await stack.ledger()
    jobs_before = await pool.fetchval("SELECT count(*) FROM jobs")

    response = await http.post("/jobs", content=body, headers={"content-type": "application/json"})

    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_params"
    assert response.json()["error"]["detail"]["field"] == field
    assert await pool.fetchval("SELECT count(*) FROM jobs") == jobs_before  # nothing written
    assert (await http.get("/health")).status_code == 200  # the connection survived


async def test_deeply_nested_json_is_refused(make_stack: StackFactory, tmp_path: Path) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    nested = "[" * 5000 + "]" * 5000

    response = await http.post("/jobs", content=raw_task('"deep"', extra=f', "labels": {nested}'))

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_params"


async def test_job_ids_ending_like_a_sub_route_address_their_own_job(make_stack: StackFactory, tmp_path: Path) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    base = (await http.post("/jobs", json=stack.task(key=f"evx-{short_id()}", target_id="demo"))).json()["job"]
    suffix_key = base["idempotency_key"] + "/events"
    other = (await http.post("/jobs", json=stack.task(key=suffix_key, target_id="demo"))).json()["job"]
    cancel_key = base["idempotency_key"] + "/cancel"
    victim = (await http.post("/jobs", json=stack.task(key=cancel_key, target_id="demo"))).json()["job"]
    enc = httpx.URL

    # GET /jobs/<…/events> is the job, not the events of <…>
    got = await http.get(enc(f"/jobs/{other['job_id'].replace('/', '%2F')}"))
    assert got.status_code == 200 and got.json()["job_id"] == other["job_id"]
    # POST /jobs/<…/cancel> is not a cancel of <…>
    refused = await http.post(enc(f"/jobs/{victim['job_id'].replace('/', '%2F')}"))
    assert refused.status_code == 405
    assert (await http.get(f"/jobs/{base['job_id']}")).json()["status"] != "cancelled"
    # the real sub-routes still work on the suffixed ids
    events = await http.get(enc(f"/jobs/{other['job_id'].replace('/', '%2F')}/events"))
    assert events.status_code == 200 and events.json()["job_id"] == other["job_id"]


async def test_a_read_of_a_sub_routes_address_never_reports_another_job(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    """``/jobs/<a>/cancel`` and ``/jobs/<a>/events/ack``, their ``/`` not encoded, are the
    cancel and the ack of ``<a>`` (only an encoded ``/`` keeps a sub-route's name inside
    the job id). Until 2026-12-07 a ``GET`` (and ``HEAD``) there was read as the job
    ``<a>/cancel`` — reported whole when such a job existed, ``404 unknown job`` when it did
    not — and ``OPTIONS`` offered ``GET`` there. They are the protocol's ``405`` with
    ``Allow: OPTIONS, POST`` now; the jobs of those ids answer at their encoded address."""
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    base = (await http.post("/jobs", json=stack.task(key=f"sub-{short_id()}", target_id="demo"))).json()["job"]
    for suffix in ("/cancel", "/events/ack"):
        named = await http.post("/jobs", json=stack.task(key=base["idempotency_key"] + suffix, target_id="demo"))
        other = named.json()["job"]
        assert other["job_id"] == base["job_id"] + suffix
        for method in ("GET", "HEAD", "PATCH"):
            refused = await http.request(method, f"/jobs/{base['job_id']}{suffix}")
            assert (refused.status_code, refused.headers.get("allow")) == (405, "OPTIONS, POST"), (
                suffix,
                method,
                refused.text,
            )
            if method != "HEAD":
                assert refused.json()["error"]["code"] == "invalid_params", refused.text
                assert other["job_id"] not in refused.text
        options = await http.options(f"/jobs/{base['job_id']}{suffix}")
        assert (options.status_code, options.headers["allow"]) == (204, "OPTIONS, POST"), suffix
        # the job of that id, at its own address
        encoded = httpx.URL(f"/jobs/{other['job_id'].replace('/', '%2F')}")
        got = await http.get(encoded)
        assert got.status_code == 200 and got.json()["job_id"] == other["job_id"], got.text
        assert (await http.options(encoded)).headers["allow"] == "GET, HEAD, OPTIONS"
    # a read of the events of <a> stays the events of <a>
    events = await http.get(f"/jobs/{base['job_id']}/events")
    assert events.status_code == 200 and events.json()["job_id"] == base["job_id"]
    # and the cancel of <a> cancels <a> only
    cancelled = await http.post(f"/jobs/{base['job_id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["job_id"] == base["job_id"], cancelled.text
    for suffix in ("/cancel", "/events/ack"):
        untouched = await http.get(httpx.URL(f"/jobs/{base['job_id']}{suffix.replace('/', '%2F')}"))
        assert untouched.json()["status"] != "cancelled", untouched.text


async def test_a_sub_route_spelled_with_percent_escapes_is_that_sub_route(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    """``%65vents`` is ``events`` (RFC 3986 §6.2.2.2: a percent-encoded unreserved character
    is the character): only an encoded ``/`` makes a sub-route's name part of the job id."""
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    job = (await http.post("/jobs", json=stack.task(key=f"pct-{short_id()}", target_id="demo"))).json()["job"]
    first = (await http.get(f"/jobs/{job['job_id']}/events")).json()["events"][0]["event_id"]

    events = await http.get(httpx.URL(f"/jobs/{job['job_id']}/%65vents"))
    assert events.status_code == 200, events.text
    assert events.json()["events"][0]["event_id"] == first
    acked = await http.post(httpx.URL(f"/jobs/{job['job_id']}/events/%61ck"), json={"ack_through": first})
    assert acked.status_code == 200, acked.text
    assert acked.json()["acked"] == 1
    cancelled = await http.post(httpx.URL(f"/jobs/{job['job_id']}/%63%61ncel"))
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["job_id"] == job["job_id"]


async def test_an_unreachable_ledger_is_a_retryable_error() -> None:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/boom")
    async def boom() -> None:
        raise ConnectionRefusedError(111, "Connection refused")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
        response = await http.get("/boom")

    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    error = response.json()["error"]
    assert (error["code"], error["retryable"], error["detail"]["reason"]) == (
        "internal_error",
        True,
        "ledger_unavailable",
    )


# ---- bodies a JSON parser would read more than one way, or not as sent -----------------------

AMBIGUOUS_OR_UNREADABLE: list[tuple[str, bytes, dict[str, str], int, str]] = [
    # (name, body, extra headers, status, detail.reason) — every one used to be admitted (202)
    # or refused as "not valid JSON" without saying what was wrong
    ("a member twice", raw_task('"dup"', extra=', "idempotency_key": "dup-other"'), {}, 400, "duplicate_member"),
    ("a nested member twice", raw_task('"dupn"', '{"query": {"tags": ["a"], "tags": ["b"]}}'), {}, 400,
     "duplicate_member"),
    ("twice in an unknown member", raw_task('"dupu"', extra=', "x": {"a": 1, "a": 2}'), {}, 400, "duplicate_member"),
    ("NaN", raw_task('"nan"', extra=', "x": NaN'), {}, 400, "not_json_number"),
    ("-Infinity", raw_task('"inf"', extra=', "x": -Infinity'), {}, 400, "not_json_number"),
    ("1e400", raw_task('"e400"', extra=', "x": 1e400'), {}, 400, "number_out_of_range"),
    ("5000 digits", raw_task('"digits"', extra=', "deadline_ms": ' + "9" * 5000), {}, 400, "number_out_of_range"),
    ("not UTF-8", raw_task('"nu"')[:-1] + b', "x": "\xff"}', {}, 400, "not_utf8"),
    ("not JSON", b'{"protocol_version": "1",', {}, 400, "invalid_json"),
    ("text/plain", raw_task('"tp"'), {"content-type": "text/plain"}, 415, "unsupported_media_type"),
    ("a form", raw_task('"form"'), {"content-type": "application/x-www-form-urlencoded"}, 415,
     "unsupported_media_type"),
    # "cafÃ©" in Latin-1 is valid UTF-8 for "café": read as UTF-8 it was admitted with another tag
    ("Latin-1", raw_task('"l1"', '{"query": {"tags": ["caf\u00c3\u00a9"]}}').decode().encode("latin-1"),
     {"content-type": "application/json; charset=iso-8859-1"}, 415, "unsupported_charset"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "body", "headers", "status", "reason"),
    AMBIGUOUS_OR_UNREADABLE,
    ids=[c[0] for c in AMBIGUOUS_OR_UNREADABLE],
)
async def test_a_body_read_more_than_one_way_or_not_as_sent_is_refused_saying_why(
    make_stack: StackFactory, tmp_path: Path, name: str, body: bytes, headers: dict[str, str], status: int, reason: str
) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    pool = await stack.ledger()
    before = await pool.fetchval("SELECT count(*) FROM jobs")

    answer = await http.post("/jobs", content=body, headers={"content-type": "application/json", **headers})

    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["detail"]["reason"]) == ("invalid_params", reason), error
    assert await pool.fetchval("SELECT count(*) FROM jobs") == before  # nothing admitted
    # the ack reads its body the same way
    ack = await http.post(
        "/jobs/nobody/events/ack", content=body, headers={"content-type": "application/json", **headers}
    )
    assert (ack.status_code, ack.json()["error"]["detail"]["reason"]) == (status, reason)


@pytest.mark.parametrize(
    ("name", "prefix", "content_type"),
    [
        ("a UTF-8 byte order mark", b"\xef\xbb\xbf", "application/json"),  # RFC 8259 §8.1: may be ignored
        ("charset UTF-8", b"", "application/json; charset=UTF-8"),
        ("a +json type", b"", "application/vnd.example+json"),
        ("no Content-Type", b"", None),
    ],
)
async def test_json_in_utf8_is_read_whatever_its_label_says(
    make_stack: StackFactory, tmp_path: Path, name: str, prefix: bytes, content_type: str | None
) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    key = f"ok-{short_id()}"

    headers = {"content-type": content_type} if content_type else {}
    answer = await http.post("/jobs", content=prefix + raw_task(f'"{key}"'), headers=headers)

    assert answer.status_code == 202, answer.text
    assert answer.json()["job"]["idempotency_key"] == key


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/jobs?idempotency_key=a&idempotency_key=b", "idempotency_key"),
        ("/jobs/demo@manual-x/events?limit=1&limit=600", "limit"),
        ("/jobs/demo@manual-x/events?after=evt-1-1&after=evt-2-2", "after"),
    ],
)
async def test_a_query_parameter_given_twice_is_refused(
    make_stack: StackFactory, tmp_path: Path, path: str, field: str
) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()

    answer = await http.get(path)

    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["detail"]["field"], error["detail"]["reason"]) == (
        "invalid_params",
        field,
        "repeated_parameter",
    )


# ---- methods: HEAD and OPTIONS everywhere, Allow on every 405 ------------------------------


async def test_every_path_answers_head_and_options_and_names_its_methods(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    job = (await http.post("/jobs", json=stack.task(key=f"m-{short_id()}", target_id="demo"))).json()["job"]
    job_path = f"/jobs/{job['job_id']}"
    allowed = {
        "/health": "GET, HEAD, OPTIONS",
        "/ready": "GET, HEAD, OPTIONS",
        "/capabilities": "GET, HEAD, OPTIONS",
        "/jobs": "GET, HEAD, OPTIONS, POST",
        job_path: "GET, HEAD, OPTIONS",
        # a sub-route's address, its ``/`` not encoded, is that sub-route's only (the jobs
        # ``…/cancel``, ``…/events/ack`` are at ``…%2Fcancel``, ``…%2Fevents%2Fack``)
        f"{job_path}/cancel": "OPTIONS, POST",
        f"{job_path}/events": "GET, HEAD, OPTIONS",
        f"{job_path}/events/ack": "OPTIONS, POST",
    }
    for path, methods in allowed.items():
        got = await http.get(path)
        head = await http.head(path)
        # RFC 9110 §9.3.2: HEAD is GET without the content
        assert (head.status_code, head.headers["content-type"], head.content) == (
            got.status_code,
            got.headers["content-type"],
            b"",
        ), path
        options = await http.options(path)
        assert (options.status_code, options.headers["allow"]) == (204, methods), path
        refused = await http.request("PATCH", path)
        # RFC 9110 §15.5.6: a 405 names the methods the resource has
        assert (refused.status_code, refused.headers["allow"]) == (405, methods), path
        assert refused.json()["error"]["code"] == "invalid_params"
    # POST /jobs/<a job id ending in %2Fcancel> is no cancel: the job answers GET only, and
    # OPTIONS and every 405 there say so too (they once offered the POST they refuse)
    for suffix in ("%2Fcancel", "%2Fevents%2Fack", "%2Fevents/ack"):
        encoded = await http.post(httpx.URL(f"{job_path}{suffix}"))
        assert (encoded.status_code, encoded.headers["allow"]) == (405, "GET, HEAD, OPTIONS"), suffix
        options = await http.options(httpx.URL(f"{job_path}{suffix}"))
        assert options.headers["allow"] == "GET, HEAD, OPTIONS", suffix
        refused = await http.request("PATCH", httpx.URL(f"{job_path}{suffix}"))
        assert (refused.status_code, refused.headers["allow"]) == (405, "GET, HEAD, OPTIONS"), suffix
    # a sub-route's name spelled with escapes of unreserved characters is that sub-route
    options = await http.options(httpx.URL(f"{job_path}/%63ancel"))
    assert options.headers["allow"] == "OPTIONS, POST"
    # without a token, HEAD is refused as GET is; OPTIONS names methods only
    async with httpx.AsyncClient(base_url=stack.api.url if stack.api else "") as anonymous:
        assert (await anonymous.head(job_path)).status_code == 401
        assert (await anonymous.options(job_path)).status_code == 204
        assert (await anonymous.options("/no/such/path")).status_code == 404


# ---- Accept: the job surface answers JSON, and says so when JSON is refused ----------------


@pytest.mark.parametrize(
    ("accept", "status"),
    [
        ("text/html", 406),
        ("application/xml, text/*;q=0.5", 406),
        ("application/json;q=0, */*", 406),  # the most specific range decides (RFC 9110 §12.5.1)
        ("application/json", 200),
        ("application/json; charset=utf-8", 200),
        ("text/html, application/*;q=0.1", 200),
        ("*/*", 200),
        ("", 200),
    ],
)
async def test_an_accept_that_refuses_json_is_told_so(
    make_stack: StackFactory, tmp_path: Path, accept: str, status: int
) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    job = (await http.post("/jobs", json=stack.task(key=f"a-{short_id()}", target_id="demo"))).json()["job"]

    for path in ("/capabilities", f"/jobs/{job['job_id']}", f"/jobs/{job['job_id']}/events"):
        answer = await http.get(path, headers={"accept": accept})
        assert answer.status_code == status, (path, answer.text)
        if status == 406:
            error = answer.json()["error"]
            assert (error["code"], error["detail"]["reason"]) == ("invalid_params", "not_acceptable")
    # refused before anything is admitted
    key = f"acc-{short_id()}"
    admitted = await http.post("/jobs", json=stack.task(key=key, target_id="demo"), headers={"accept": accept})
    assert admitted.status_code == (406 if status == 406 else 202), admitted.text
    found = (await http.get("/jobs", params={"idempotency_key": key})).json()["jobs"]
    assert len(found) == (0 if status == 406 else 1)
    # the probes answer whatever a monitor accepts
    assert (await http.get("/health", headers={"accept": accept})).status_code == 200


# ---- a refusal that names what was sent can always be answered -------------------------------

ECHOED_LONE_SURROGATES: list[tuple[str, bytes, str, dict[str, object]]] = [
    # (name, body, code, what detail says) — each was a 500: the refusal echoed the consumer's
    # value, and a lone surrogate has no UTF-8 encoding, so the answer itself could not be sent
    ("protocol_version", b'{"protocol_version": "\\ud800", "job_type": "candidate_search", "idempotency_key": "s1"}',
     "unsupported_protocol_version", {"received": "\ufffd", "supported": ["1"]}),
    ("job_type", b'{"protocol_version": "1", "job_type": "x\\udfff", "idempotency_key": "s2"}',
     "invalid_params", {"reason": "unsupported_job_type", "job_type": "x\ufffd", "supported": ["candidate_search"]}),
    ("a member twice", raw_task('"s3"', extra=', "x": {"\\ud800": 1, "\\ud800": 2}'),
     "invalid_params", {"reason": "duplicate_member", "member": "\ufffd"}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("lines", "status"),
    [
        (["text/html", "application/json"], 200),  # the second line accepts JSON
        (["text/html", "application/*;q=0.5"], 200),
        (["*/*", "application/json;q=0"], 406),  # the most specific range decides, on any line
        (["application/json;q=0", "*/*"], 406),
        (["text/html", ""], 406),  # an empty line adds nothing to the list
        (["", ""], 200),  # as no Accept at all
    ],
)
async def test_an_accept_sent_on_several_lines_is_one_list(
    make_stack: StackFactory, tmp_path: Path, lines: list[str], status: int
) -> None:
    # RFC 9110 §5.3 and §12.5.1: Accept is a list; its field lines are one value, joined
    # with commas. Before 2026-12-07 only the first line was read: ``text/html`` then
    # ``application/json`` was a 406, ``*/*`` then ``application/json;q=0`` a 200.
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    job = (await http.post("/jobs", json=stack.task(key=f"a-{short_id()}", target_id="demo"))).json()["job"]
    headers = [("authorization", f"Bearer {API_TOKEN}"), *(("accept", line) for line in lines)]

    for path in ("/capabilities", f"/jobs/{job['job_id']}", f"/jobs/{job['job_id']}/events"):
        answer = await http.get(path, headers=httpx.Headers(headers))
        assert answer.status_code == status, (path, lines, answer.text)
        if status == 406:
            error = answer.json()["error"]
            assert (error["code"], error["detail"]["reason"]) == ("invalid_params", "not_acceptable")
    key = f"acc-{short_id()}"
    admitted = await http.post("/jobs", json=stack.task(key=key, target_id="demo"), headers=httpx.Headers(headers))
    assert admitted.status_code == (406 if status == 406 else 202), admitted.text
    found = (await http.get("/jobs", params={"idempotency_key": key})).json()["jobs"]
    assert len(found) == (0 if status == 406 else 1)


@pytest.mark.parametrize(
    ("name", "body", "code", "detail"), ECHOED_LONE_SURROGATES, ids=[c[0] for c in ECHOED_LONE_SURROGATES]
)
async def test_a_refusal_naming_a_lone_surrogate_is_answered_not_a_500(
    make_stack: StackFactory, tmp_path: Path, name: str, body: bytes, code: str, detail: dict[str, object]
) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    pool = await stack.ledger()
    before = await pool.fetchval("SELECT count(*) FROM jobs")

    answer = await http.post("/jobs", content=body, headers={"content-type": "application/json"})

    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["detail"]) == (code, detail)
    assert await pool.fetchval("SELECT count(*) FROM jobs") == before
    if name == "a member twice":  # the ack reads its body the same way
        ack = await http.post("/jobs/nobody/events/ack", content=b'{"\\ud800": 1, "\\ud800": 2}')
        assert (ack.status_code, ack.json()["error"]["detail"]) == (400, detail)


# ---- a content coding: the body is read as sent, or refused saying why -----------------------

CODINGS: list[tuple[str, bytes, str]] = [
    # (name, body, Content-Encoding) — a gzip body was refused as "not UTF-8 at offset 1"; a
    # JSON body labelled gzip or br was admitted: read otherwise than it said it was sent
    ("gzip", gzip.compress(raw_task('"gz"')), "gzip"),
    ("plain JSON labelled gzip", raw_task('"gz-lie"'), "gzip"),
    ("br", raw_task('"br"'), "br"),
    ("two codings", raw_task('"two"'), "identity, gzip"),
    ("deflate", raw_task('"deflate"'), "Deflate"),
]


@pytest.mark.parametrize(("name", "body", "coding"), CODINGS, ids=[c[0] for c in CODINGS])
async def test_a_content_coding_is_refused_saying_so(
    make_stack: StackFactory, tmp_path: Path, name: str, body: bytes, coding: str
) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    pool = await stack.ledger()
    before = await pool.fetchval("SELECT count(*) FROM jobs")
    headers = {"content-type": "application/json", "content-encoding": coding}

    for path in ("/jobs", "/jobs/nobody/events/ack"):
        answer = await http.post(path, content=body, headers=headers)
        assert answer.status_code == 415, (path, answer.text)
        error = answer.json()["error"]
        assert (error["code"], error["detail"]["reason"]) == ("invalid_params", "unsupported_content_encoding")
        # RFC 9110 §15.5.16: a 415 for a content coding names the codings accepted
        assert answer.headers["accept-encoding"] == "identity"
    assert await pool.fetchval("SELECT count(*) FROM jobs") == before
    # the legacy shim reads its body the same way, in its own shape
    assert stack.api is not None
    async with httpx.AsyncClient(base_url=stack.api.url, headers={"Authorization": f"Bearer {API_TOKEN}"}) as raw:
        legacy = await raw.post(
            "/internal/targets/demo/refetch", content=b'{"requestId": "' + str(uuid.uuid4()).encode() + b'"}',
            headers=headers,
        )  # fmt: skip
    assert (legacy.status_code, legacy.headers["accept-encoding"]) == (415, "identity"), legacy.text
    assert legacy.json()["status"] == "error"
    assert await pool.fetchval("SELECT count(*) FROM jobs") == before


#: (name, Transfer-Encoding, body before its chunked framing): the transfer codings but
#: ``chunked`` are not decoded, so the body was read as other bytes than the client meant —
#: a gzip body refused as "not UTF-8 at offset 1", a JSON body under ``foo`` admitted.
TRANSFER_CODINGS = [
    ("gzip", "gzip, chunked", gzip.compress(raw_task('"te-gz"'))),
    ("plain JSON labelled gzip", "gzip, chunked", raw_task('"te-gz-lie"')),
    ("an unknown coding", "foo, chunked", raw_task('"te-foo"')),
]


@pytest.mark.parametrize(("name", "coding", "body"), TRANSFER_CODINGS, ids=[c[0] for c in TRANSFER_CODINGS])
async def test_a_transfer_coding_but_chunked_is_refused_saying_so(
    make_stack: StackFactory, tmp_path: Path, name: str, coding: str, body: bytes
) -> None:
    """RFC 9112 §6.1: a server that receives a request with a transfer coding it does not
    understand responds ``501``."""
    stack = make_stack(config(tmp_path))
    await stack.start_api()
    assert stack.api is not None
    pool = await stack.ledger()
    before = await pool.fetchval("SELECT count(*) FROM jobs")
    host, port = stack.api.url.removeprefix("http://").split(":")

    answers = {}
    for path in ("/jobs", "/jobs/nobody/events/ack", "/internal/targets/demo/refetch"):
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {API_TOKEN}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nTransfer-Encoding: {coding}\r\n\r\n".encode()
            + b"%x\r\n" % len(body)
            + body
            + b"\r\n0\r\n\r\n"
        )
        await writer.drain()
        answers[path] = await asyncio.wait_for(reader.read(), 10)
        writer.close()

    for path, answer in answers.items():
        head, _, text = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 501 "), (path, answer[:300])
        if path.startswith("/jobs"):
            error = json.loads(text)["error"]
            assert (error["code"], error["detail"]["reason"]) == ("invalid_params", "unsupported_transfer_coding")
        else:  # the legacy shim, in its own shape
            assert json.loads(text)["status"] == "error", answer
    assert await pool.fetchval("SELECT count(*) FROM jobs") == before


async def test_identity_is_no_content_coding(make_stack: StackFactory, tmp_path: Path) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    key = f"ident-{short_id()}"

    answer = await http.post("/jobs", content=raw_task(f'"{key}"'), headers={"content-encoding": "Identity"})

    assert answer.status_code == 202, answer.text


async def test_the_legacy_shim_closes_the_connection_of_a_late_body(make_stack: StackFactory, tmp_path: Path) -> None:
    # its 408 came without ``Connection: close``: a client reusing the connection had its next
    # request read as the rest of the late body
    cfg = config(tmp_path)
    cfg["api"] = {**cfg["api"], "body_timeout_ms": 300}  # type: ignore[dict-item]
    stack = make_stack(cfg)
    await stack.start_api()
    assert stack.api is not None
    host, port = stack.api.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(
            b"POST /internal/targets/demo/refetch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + API_TOKEN.encode()
            + b'\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"requestId": "'
        )
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    finally:
        writer.close()

    lines = head.decode("latin-1").lower().split("\r\n")
    assert lines[0].startswith("http/1.1 408"), lines
    assert "connection: close" in lines, lines


async def test_an_integer_written_as_6e4_is_the_integer(make_stack: StackFactory, tmp_path: Path) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    key = f"e4-{short_id()}"
    params = '{"target_id": "demo", "query": {"tags": ["a"]}, "constraints": {"limit": %s}}'

    first = await http.post("/jobs", content=raw_task(f'"{key}"', params % "3.0", ', "deadline_ms": 6e4'))
    replay = await http.post("/jobs", content=raw_task(f'"{key}"', params % "3", ', "deadline_ms": 60000'))

    assert first.status_code == 202, first.text
    job = first.json()["job"]
    assert job["deadline_at"] - job["created_at"] == 60000
    assert (replay.status_code, replay.content) == (200, first.content)  # one request, however written


@pytest.mark.parametrize(
    ("name", "headers", "status", "reason"),
    [
        # Content-Encoding is a list (RFC 9110 §8.4): two lines are "identity, gzip", a coding
        ("a coding on a second line", [("content-encoding", "identity"), ("content-encoding", "gzip")], 415,
         "unsupported_content_encoding"),
        # Content-Type is one value (§8.3): two different ones label the body two ways; the
        # first was taken
        ("two media types", [("content-type", "application/json"), ("content-type", "text/plain")], 400,
         "repeated_header"),
        ("two charsets", [("content-type", "application/json"), ("content-type", "application/json; charset=latin1")],
         400, "repeated_header"),
    ],
)  # fmt: skip
async def test_a_body_labelled_on_two_lines_is_read_as_both_say(
    make_stack: StackFactory, tmp_path: Path, name: str, headers: list[tuple[str, str]], status: int, reason: str
) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    pool = await stack.ledger()
    before = await pool.fetchval("SELECT count(*) FROM jobs")

    for path in ("/jobs", "/jobs/nobody/events/ack"):
        answer = await http.post(path, content=raw_task(f'"two-{short_id()}"'), headers=headers)
        assert answer.status_code == status, (path, answer.text)
        error = answer.json()["error"]
        assert (error["code"], error["detail"]["reason"]) == ("invalid_params", reason)
        if reason == "repeated_header":
            assert error["detail"]["field"] == "Content-Type"
    assert await pool.fetchval("SELECT count(*) FROM jobs") == before


async def test_the_same_label_twice_is_one_label(make_stack: StackFactory, tmp_path: Path) -> None:
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()

    twice = [("content-type", "application/json"), ("content-type", "application/json")]
    answer = await http.post("/jobs", content=raw_task(f'"same-{short_id()}"'), headers=twice)

    assert answer.status_code == 202, answer.text
    # The same media type written otherwise (RFC 9110 §8.3.1: type, subtype and a
    # parameter's name are case-insensitive, so is charset's value; quotes and spaces are
    # syntax): one label too — until 2026-12-06 a 400 repeated_header.
    for other in ("Application/JSON", "application/json; charset=UTF-8", 'application/json;charset="utf-8"'):
        alike = [("content-type", "application/json; charset=utf-8"), ("content-type", other)]
        if other == "Application/JSON":
            alike = [("content-type", "application/json"), ("content-type", other)]
        answer = await http.post("/jobs", content=raw_task(f'"alike-{short_id()}"'), headers=alike)
        assert answer.status_code == 202, (other, answer.text)


# ---- a refused token names its challenge; a trailing slash is no redirect -------------------


async def test_a_refused_token_names_the_bearer_challenge(make_stack: StackFactory, tmp_path: Path) -> None:
    # RFC 9110 §11.6.1 / §15.5.2: a 401 MUST carry WWW-Authenticate with a challenge; RFC 6750
    # §3: the Bearer scheme, error="invalid_token" when a token was sent and refused, no error
    # code when none was sent (§3.1).
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    legacy = f"/internal/targets/demo/refetch/{uuid.uuid4()}"
    async with httpx.AsyncClient(base_url=str(http.base_url)) as anonymous:
        for method, path in (("GET", "/capabilities"), ("HEAD", "/jobs/x"), ("POST", "/jobs"), ("GET", legacy)):
            missing = await anonymous.request(method, path)
            assert (missing.status_code, missing.headers.get("www-authenticate")) == (401, "Bearer"), path
            wrong = await anonymous.request(method, path, headers={"Authorization": "Bearer not-the-token"})
            assert (wrong.status_code, wrong.headers.get("www-authenticate")) == (
                401,
                'Bearer error="invalid_token"',
            ), path
            other = await anonymous.request(method, path, headers={"Authorization": f"Basic {API_TOKEN}"})
            assert (other.status_code, other.headers.get("www-authenticate")) == (401, "Bearer"), path
    assert "www-authenticate" not in (await http.get("/capabilities")).headers


async def test_two_different_credentials_are_no_credential(make_stack: StackFactory, tmp_path: Path) -> None:
    # Authorization is no list (RFC 9110 §11.6.2, §5.3: a sender must not send it twice): a
    # request carrying two different credentials has no one credential. Until 2026-12-07 its
    # first line decided — the token then anything was served, anything then the token a 401.
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    legacy = f"/internal/targets/demo/refetch/{uuid.uuid4()}"
    right, wrong = f"Bearer {API_TOKEN}", "Bearer not-the-token"
    async with httpx.AsyncClient(base_url=str(http.base_url)) as anonymous:
        for lines in ([right, wrong], [wrong, right], [right, f"Basic {API_TOKEN}"], [f"Basic {API_TOKEN}", right]):
            headers = httpx.Headers([("authorization", line) for line in lines])
            for method, path in (("GET", "/capabilities"), ("HEAD", "/jobs/x"), ("GET", legacy)):
                answer = await anonymous.request(method, path, headers=headers)
                assert (answer.status_code, answer.headers.get("www-authenticate")) == (
                    401,
                    'Bearer error="invalid_token"',
                ), (lines, path)
            key = f"two-{short_id()}"
            admitted = await anonymous.post("/jobs", json=stack.task(key=key, target_id="demo"), headers=headers)
            assert admitted.status_code == 401, (lines, admitted.text)
            assert (await http.get("/jobs", params={"idempotency_key": key})).json()["jobs"] == []
        # the same credential twice is that credential (the scheme's case, spaces: RFC 9110 §11.1);
        # a blank line carries none
        for lines in ([right, f"bearer   {API_TOKEN}"], [right, ""], ["", right]):
            headers = httpx.Headers([("authorization", line) for line in lines])
            assert (await anonymous.get("/capabilities", headers=headers)).status_code == 200, lines


@pytest.mark.parametrize("path", ["/capabilities/", "/health/", "/ready/", "/openapi.json/", "/metrics/", "/docs/"])
async def test_a_trailing_slash_is_no_redirect(make_stack: StackFactory, tmp_path: Path, path: str) -> None:
    # Starlette's redirect_slashes answered these 307 with an empty body and a Location built
    # from the request's Host header (a consumer behind a proxy was sent to the proxy's
    # upstream, or to any host the request named), before any token check.
    stack = make_stack(config(tmp_path))
    await stack.start_api()
    assert stack.api is not None
    async with httpx.AsyncClient(base_url=stack.api.url) as raw:
        for method in ("GET", "POST"):
            answer = await raw.request(
                method, path, headers={"Host": "elsewhere.example", "Authorization": f"Bearer {API_TOKEN}"}
            )
            assert answer.status_code == 404, (method, answer.status_code, answer.headers)
            assert "location" not in answer.headers
            assert answer.json()["error"] == {"code": "invalid_params", "message": "not found", "retryable": False}


async def test_an_integer_query_parameter_is_decimal_digits(make_stack: StackFactory, tmp_path: Path) -> None:
    # ``limit`` and ``wait_ms`` were read by the framework's lax integer parsing: ``1_0`` was 10,
    # ``+1``, `` 1``, ``1.0`` and ``\n3`` were numbers, while ``1e2`` or ``١`` were refused —
    # a query integer is ASCII decimal digits (as ``unacked`` takes its spellings only).
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    job = (await http.post("/jobs", json=stack.task(key=f"q-{short_id()}", target_id="demo"))).json()["job"]
    events = f"/jobs/{job['job_id']}/events"
    for field in ("limit", "wait_ms"):
        for value in ("1_0", "+1", " 1", "1 ", "1.0", "\n3", "0x1", "1e2", "١", "-0", ""):
            answer = await http.get(events, params={field: value})
            assert answer.status_code == 400, (field, value, answer.text)
            error = answer.json()["error"]
            assert (error["code"], error["detail"]["field"]) == ("invalid_params", field), (field, value)
        for value in ("1", "01", "200"):
            assert (await http.get(events, params={field: value})).status_code == 200, (field, value)
    page = (await http.get(events, params={"limit": "01"})).json()
    assert len(page["events"]) == 1


async def test_an_admission_names_the_jobs_address_in_location(make_stack: StackFactory, tmp_path: Path) -> None:
    # RFC 9110 §15.3.3: a 202 ought to point to a status monitor. The answer said the job's
    # id and events_url but not where the job itself is read; a client following Location
    # (the usual 202 contract) had nothing to follow.
    stack = make_stack(config(tmp_path))
    http = await stack.start_api()
    for key in (f"loc-{short_id()}", f"loc/{short_id()}?a#b %é", f"..{short_id()}"):
        task = stack.task(key=key, target_id="demo")
        first = await http.post("/jobs", json=task)
        assert first.status_code == 202, first.text
        job = first.json()["job"]
        location = first.headers.get("location")
        assert location == job["events_url"].removesuffix("/events"), (key, location)
        read = await http.get(httpx.URL(location))
        assert (read.status_code, read.json()["job_id"]) == (200, job["job_id"]), key
        replay = await http.post("/jobs", json=task)
        assert (replay.status_code, replay.headers.get("location")) == (200, location), key
    refused = await http.post("/jobs", json={"protocol_version": "2"})
    assert refused.status_code == 400 and "location" not in refused.headers
