"""Pure rules of the HTTP facade: callback classification, log sanitising, the published
schema and OpenAPI document, the client's error classes, job paths."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator
from starlette.requests import Request

from curaflow import client
from curaflow.api.app import create_app, request_context, sanitize_header
from curaflow.api.auth import TWO_CREDENTIALS, supplied_token
from curaflow.api.body import accept_value, coding_refusal, json_refusal, media_type_refusal, parse_json
from curaflow.api.openapi import OPERATIONS, build_openapi
from curaflow.config import Settings
from curaflow.domain.messages import CallbackPolicy
from curaflow.jobs.pushes import Verdict, classify_answer, push_headers, sweep_idle_ms
from curaflow.protocol import models
from curaflow.protocol.errors import PROTOCOL_CODES, ProtocolError
from curaflow.protocol.projection import job_path
from curaflow.protocol.schemas import protocol_schema, upstream_schema
from tests.schema import expected_schema, validate


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (200, Verdict.DELIVERED),
        (204, Verdict.DELIVERED),
        (409, Verdict.DELIVERED),
        (429, Verdict.RETRY),
        (500, Verdict.RETRY),
        (503, Verdict.RETRY),
        (408, Verdict.RETRY),  # HTTP's own "send it again" (routes.base.SEND_AGAIN_STATUSES): dead until 2026-12-06
        (421, Verdict.RETRY),  # sent again over another connection (RFC 9110 §15.5.20): dead until 2026-12-07
        (425, Verdict.RETRY),
        (None, Verdict.RETRY),
        (400, Verdict.DEAD),
        (404, Verdict.DEAD),
        (410, Verdict.DEAD),
        (301, Verdict.RETRY),  # a redirect is never followed, and costs one attempt: dead until 2026-12-06
    ],
)
def test_callback_answers(status: int | None, verdict: Verdict) -> None:
    assert classify_answer(status) == verdict


def test_push_headers_carry_the_event_id() -> None:
    headers = push_headers("demo@manual-k", "evt-3-0a1b2c3d")
    assert headers["content-type"] == "application/json"
    assert headers["idempotency-key"] == "evt-3-0a1b2c3d"
    assert headers["x-idempotency-key"] == "job-event:demo@manual-k:evt-3-0a1b2c3d"
    # the sweeper waits longer than any gap between two attempts of a live push
    policy = CallbackPolicy(timeout_ms=30_000, max_interval_ms=60_000)
    assert sweep_idle_ms(policy) > policy.timeout_ms + policy.max_interval_ms


def _request(headers: dict[str, str]) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "GET", "path": "/", "headers": raw, "query_string": b""})


def test_attempt_id_and_provider_are_sanitised_and_never_synthesised() -> None:
    assert request_context(_request({})) == {}
    fields = request_context(_request({"X-Schedule-Attempt-Id": "a b/c:1." + "z" * 80, "X-Schedule-Provider": "gh!x"}))
    assert fields == {"attempt_id": ("abc:1." + "z" * 80)[:64], "provider": "ghx"}
    assert request_context(_request({"X-Attempt-Id": "run-7"})) == {"attempt_id": "run-7"}
    assert request_context(_request({"X-Schedule-Attempt-Id": "s", "X-Attempt-Id": "t"})) == {"attempt_id": "s"}
    assert request_context(_request({"X-Schedule-Attempt-Id": "???"})) == {}
    assert sanitize_header("p" * 40 + ":", __import__("re").compile(r"[^a-z]"), 32) == "p" * 32


def test_the_published_schema_is_valid_and_extended() -> None:
    schema = protocol_schema()
    Draft202012Validator.check_schema(schema)
    defs = schema["$defs"]
    for name in ("JobEnvelope", "JobPage", "EventPage", "AckRequest", "AckResult", "ErrorResponse", "AuthError"):
        assert name in defs
    upstream = upstream_schema()
    Draft202012Validator.check_schema(upstream)
    # the closed features enum is upstream's; the selector is declared in the extension member
    features = defs["JobTypeDeclaration"]["properties"]["features"]
    assert features == upstream["$defs"]["JobTypeDeclaration"]["properties"]["features"]
    assert "extended_features" in defs["JobTypeDeclaration"]["properties"]
    # every upstream shape is in the published schema, which only adds to it
    for name, shape in upstream["$defs"].items():
        assert set(shape.get("required", [])) <= set(defs[name].get("required", [])) | {"query"}, name
        assert set(shape.get("properties", {})) <= set(defs[name].get("properties", {})), name
    validate({"target_id": "demo"}, "CandidateSearchParams")
    validate({"query": {"tags": ["a"]}}, "CandidateSearchParams")
    with pytest.raises(AssertionError):
        validate({"source": {"platform": "pixiv"}}, "CandidateSearchParams")
    with pytest.raises(AssertionError):
        validate({"job_id": "j", "events": [], "unacked": -1, "server_time": 0}, "EventPage")
    validate({"status": "error", "error": "unauthorized"}, "AuthError")


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "$ref"] + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_openapi_describes_every_route_with_the_protocol_schemas() -> None:
    doc = build_openapi(create_app(Settings()))
    operations = {(m, p) for p, item in doc["paths"].items() for m in item}
    assert operations == set(OPERATIONS)
    components = doc["components"]["schemas"]
    for ref in _refs(doc):
        assert ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] in components, ref
    submit = doc["paths"]["/jobs"]["post"]
    assert submit["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/Task")
    assert set(submit["responses"]) == {
        "200", "202", "400", "401", "404", "406", "408", "409", "413", "415", "500", "501", "503"
    }  # fmt: skip
    assert submit["responses"]["401"]["content"]["application/json"]["schema"]["$ref"].endswith("/AuthError")
    assert "links" in submit["responses"]["202"]
    events = doc["paths"]["/jobs/{job_id}/events"]["get"]
    params = {p["name"]: p for p in events["parameters"]}
    assert set(params) == {"job_id", "after", "unacked", "limit", "wait_ms"}
    assert params["limit"]["schema"]["maximum"] == 500 and params["wait_ms"]["schema"]["maximum"] == 30_000
    assert "security" not in doc["paths"]["/health"]["get"]
    ready = doc["paths"]["/ready"]["get"]
    assert "security" not in ready and set(ready["responses"]) == {"200", "503"}
    assert ready["responses"]["503"]["content"]["application/json"]["schema"]["$ref"].endswith("/Readiness")
    assert "not ready" in ready["responses"]["503"]["description"]
    assert all(
        "security" in op
        for (m, p), op in ((k, doc["paths"][k[1]][k[0]]) for k in OPERATIONS)
        if p not in ("/health", "/ready")
    )
    assert "422" not in str(doc["paths"])  # no framework validation shape is advertised


def test_response_hook_requires_documented_statuses() -> None:
    assert expected_schema("GET", "/jobs/a/b/events", 200) == "EventPage"
    assert expected_schema("POST", "/jobs/a/events/ack", 413) == "ErrorResponse"
    assert expected_schema("GET", "/jobs/x", 200) == "Job"
    with pytest.raises(AssertionError):
        expected_schema("GET", "/jobs/x", 409)


def test_client_has_one_exception_class_per_protocol_code() -> None:
    assert set(client.ERROR_CLASSES) == set(PROTOCOL_CODES)
    assert len(set(client.ERROR_CLASSES.values())) == len(PROTOCOL_CODES)
    for code, cls in client.ERROR_CLASSES.items():
        assert cls.code == code and issubclass(cls, client.ProtocolRefusal)
        assert cls.__name__.endswith("Error")
    assert client.ERROR_CLASSES["no_candidate"] is client.NoCandidateError
    err = client.refusal_for(models.Error(code="idempotency_conflict", message="m", retryable=False), 409)
    assert isinstance(err, client.IdempotencyConflictError) and err.http_status == 409
    assert type(client.refusal_for(models.Error(code="brand_new_code"))) is client.ProtocolRefusal
    task = client.candidate_search_task("k", target_id="demo")
    assert task.model_dump(mode="json", exclude_none=True) == {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": "k",
        "params": {"target_id": "demo"},
    }


def test_job_paths_encode_one_segment() -> None:
    assert job_path("demo@manual-k") == "/jobs/demo@manual-k"
    assert job_path("demo@manual-a/b?c#d e") == "/jobs/demo@manual-a%2Fb%3Fc%23d%20e"
    assert job_path("demo@manual-風景") == "/jobs/demo@manual-%E9%A2%A8%E6%99%AF"


async def test_an_unexpected_exception_is_a_protocol_500_logged_once() -> None:
    import httpx
    from structlog.testing import capture_logs

    app = create_app(Settings())

    @app.get("/capabilities-broken")
    async def broken() -> None:
        raise RuntimeError("secret internal detail")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # no lifespan: no database needed
    with capture_logs() as logs:
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            response = await http.get("/capabilities-broken", headers={"X-Schedule-Provider": "probe"})
    assert response.status_code == 500
    assert response.json() == {"error": {"code": "internal_error", "message": "internal error", "retryable": False}}
    assert "secret internal detail" not in response.text
    outcome = [entry for entry in logs if entry.get("http_status") == 500]
    assert [entry["event"] for entry in outcome] == ["api.request_failed", "Job API request failed"]
    assert outcome[0]["code"] == "internal_error" and outcome[0]["provider"] == "probe"


async def test_an_answer_500_is_counted_for_the_pager_and_a_ledger_outage_is_not() -> None:
    """A 500 is curaflow's own failure (a bug): counted in ``curaflow_api_internal_errors_total``,
    which ``CuraflowApiInternalErrors`` reads — until 2026-12-06 the API could answer every
    request 500 with only an error log line to say so. A ledger outage answers 503 and has
    its own alert (``CuraflowLedgerUnavailable``); a refusal (4xx) is the consumer's."""
    import asyncpg
    import httpx
    from prometheus_client import REGISTRY

    def counted() -> float:
        return REGISTRY.get_sample_value("curaflow_api_internal_errors_total") or 0.0

    app = create_app(Settings())

    @app.get("/capabilities-broken")
    async def broken() -> None:
        raise RuntimeError("a bug")

    @app.get("/capabilities-ledger-away")
    async def away() -> None:
        raise asyncpg.CannotConnectNowError("the database system is starting up")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # no lifespan: no database needed
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
        before = counted()
        assert (await http.get("/capabilities-broken")).status_code == 500
        assert counted() == before + 1
        assert (await http.get("/capabilities-ledger-away")).status_code == 503
        assert (await http.get("/no-such-path")).status_code == 404
        assert counted() == before + 1


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"a": 1, "a": 1}', "duplicate_member"),  # even the same value twice: one object, one member
        (b'{"a": {"b": [{"c": 1, "c": 2}]}}', "duplicate_member"),
        (b'{"a": NaN}', "not_json_number"),
        (b'{"a": Infinity}', "not_json_number"),
        (b'{"a": -1e309}', "number_out_of_range"),
        (b'{"a": ' + b"1" * 4301 + b"}", "number_out_of_range"),
        (b'{"a": "\xc3"}', "not_utf8"),
        (b'{"a": }', "invalid_json"),
        (b"[" * 100_000 + b"]" * 100_000, "too_deep"),
    ],
)
def test_a_json_body_has_exactly_one_meaning_or_is_refused_saying_why(raw: bytes, reason: str) -> None:
    with pytest.raises(ProtocolError) as refused:
        parse_json(raw)
    assert (refused.value.http_status, refused.value.detail["reason"]) == (400, reason)


def test_a_json_body_that_means_one_thing_is_read() -> None:
    assert parse_json(b'\xef\xbb\xbf{"a": [1, 2.5, 1e308, {"a": null}], "b": "\\u00e9"}') == {
        "a": [1, 2.5, 1e308, {"a": None}],
        "b": "\u00e9",
    }


@pytest.mark.parametrize(
    ("content_type", "reason"),
    [
        (None, None),
        ("", None),
        ("application/json", None),
        ('Application/JSON; Charset="UTF-8"', None),
        ("application/problem+json;charset=utf8", None),
        ("text/plain", "unsupported_media_type"),
        ("multipart/form-data; boundary=x", "unsupported_media_type"),
        ("application/json; charset=latin-1", "unsupported_charset"),
        ("application/json; charset=utf-16", "unsupported_charset"),
    ],
)
def test_only_json_in_utf8_is_read(content_type: str | None, reason: str | None) -> None:
    refusal = media_type_refusal(content_type)
    assert (refusal.detail["reason"] if refusal else None) == reason
    assert refusal is None or refusal.http_status == 415


@pytest.mark.parametrize(
    ("coding", "read"),
    [
        (None, True),
        ("", True),
        ("identity", True),
        (" Identity ", True),
        ("gzip", False),
        ("x-gzip", False),
        ("br", False),
        ("identity, gzip", False),
        ("gzip, identity", False),
    ],
)
def test_a_body_in_a_content_coding_is_not_read(coding: str | None, read: bool) -> None:
    refusal = coding_refusal(coding)
    assert refusal is None if read else (refusal is not None)
    if refusal is not None:
        assert (refusal.http_status, refusal.detail["reason"]) == (415, "unsupported_content_encoding")
        assert getattr(refusal, "headers", None) == {"accept-encoding": "identity"}


@pytest.mark.parametrize(
    ("accept", "acceptable"),
    [
        (None, True),
        ("*/*", True),
        ("application/json", True),
        ("text/html, application/*;q=0.2", True),
        ("application/json;q=nonsense", True),
        # Not qvalues (RFC 9110 §12.4.2: 0 to 1, three decimals at most) — junk, taken as 1
        # like any q that is no number: float() reads them, which refused JSON for "nan".
        ("application/json;q=nan", True),
        ("application/json;q=NaN, text/html", True),
        ("application/json;q=-1", True),
        ("application/json;q=1e-9", True),
        ("*/*;q=infinity", True),
        ("application/json;q=0.000", False),
        ("application/json;q=0.001", True),
        ("application/json; charset=utf-8", True),
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", True),
        ("text/html", False),
        ("application/json;q=0", False),
        ("application/json;q=0.0, */*", False),
        ("*/*;q=0", False),
    ],
)
def test_json_is_refused_only_by_an_accept_that_refuses_it(accept: str | None, acceptable: bool) -> None:
    assert (json_refusal(accept) is None) is acceptable


def test_the_routes_a_path_addresses_are_read_once_not_at_every_read_of_a_job(monkeypatch: pytest.MonkeyPatch) -> None:
    # ``GET /jobs/{id}`` asks which route its path addresses (200c4c3: ``/jobs/a/cancel`` is
    # the cancel's address, never the job ``a/cancel``). Reading every route of the app and
    # compiling each template again at every read cost ~0.46 ms of the API's event loop a
    # request (15 routes) — a tenth of the read's p99 (docs/performance.md) — for an answer
    # that changes only when the app's routes do.
    from starlette import routing

    from curaflow.process import http_methods as methods

    compiled: list[str] = []

    def counting(template: str) -> Any:
        compiled.append(template)
        return routing.compile_path(template)

    monkeypatch.setattr(methods, "compile_path", counting)
    app = create_app(Settings())
    routes = list(methods._leaf_routes(app.router))
    get_job = next(route for route, template, verbs in routes if template == "/jobs/{job_id:path}" and "GET" in verbs)

    def scope(raw: bytes) -> dict[str, Any]:
        return {"type": "http", "method": "GET", "path": raw.decode(), "raw_path": raw, "route": get_job}

    for _ in range(50):
        assert methods.serves_its_address(app.router, scope(b"/jobs/demo@manual-k"))
        assert not methods.serves_its_address(app.router, scope(b"/jobs/demo@manual-k/cancel"))
        assert methods.serves_its_address(app.router, scope(b"/jobs/demo@manual-k%2Fcancel"))
    assert len(compiled) <= len(routes), f"{len(compiled)} templates compiled for {len(routes)} routes"

    # A route added to the app is one a path may address from then on.
    async def late() -> None:  # pragma: no cover - never called
        return None

    app.add_api_route("/jobs/{job_id:path}/late", late, methods=["POST"])
    assert not methods.serves_its_address(app.router, scope(b"/jobs/demo@manual-k/late"))
    assert methods.allowed_methods(app.router, scope(b"/jobs/demo@manual-k/late")) == "OPTIONS, POST"


async def test_a_path_whose_first_segment_holds_an_encoded_slash_is_no_jobs_address() -> None:
    """``/jobs%2Fa`` is one segment, ``jobs/a`` (RFC 3986 §2.2: an encoded ``/`` separates
    nothing), the address of no route — as the API reads a path by its segments
    (``curaflow.process.http_methods.addressed_routes``, which answers ``OPTIONS`` and ``Allow``).
    The handlers had a second reading, the raw path's last segments (``literal_suffix``):
    ``POST /jobs%2Fa/cancel`` was the cancel of the job ``a``, ``GET /jobs%2Fa/events`` its
    events, ``POST /jobs%2Fa/events/ack`` its ack; and ``GET /jobs%2Fa`` a ``405`` whose
    ``Allow`` named no method. Each is the ``404`` of a path no route serves now, as
    ``OPTIONS`` there; a job id ending in an encoded sub-route's name is still that job's
    address (``405``, ``Allow: GET, HEAD, OPTIONS``)."""
    import httpx

    app = create_app(Settings(api={"insecure": True}))  # type: ignore[arg-type]
    for name in ("pool", "admitter", "notifier", "client", "settings"):  # never reached: no lifespan
        if not hasattr(app.state, name):
            setattr(app.state, name, object())
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
        for method, path in [
            ("GET", "/jobs%2Fa"),
            ("HEAD", "/jobs%2Fa"),
            ("OPTIONS", "/jobs%2Fa"),
            ("POST", "/jobs%2Fa/cancel"),
            ("GET", "/jobs%2Fa/events"),
            ("POST", "/jobs%2Fa/events/ack"),
            ("OPTIONS", "/jobs%2Fa/cancel"),
        ]:
            answer = await http.request(method, httpx.URL(path))
            assert (answer.status_code, answer.headers.get("allow")) == (404, None), (method, path, answer.text)
        for suffix in ("%2Fcancel", "%2Fevents%2Fack", "%2Fevents/ack"):
            answer = await http.post(httpx.URL(f"/jobs/a{suffix}"))
            assert (answer.status_code, answer.headers.get("allow")) == (405, "GET, HEAD, OPTIONS"), suffix
            assert answer.json()["error"]["message"] == "method not allowed", suffix


@pytest.mark.parametrize(
    ("lines", "value"),
    [
        ([], None),
        ([""], None),
        (["", "  "], None),
        (["application/json"], "application/json"),
        (["text/html", "application/json"], "text/html, application/json"),
        (["text/html", "", " */*;q=0 "], "text/html, */*;q=0"),
    ],
)
def test_accept_lines_are_one_list(lines: list[str], value: str | None) -> None:
    # RFC 9110 §5.3: a list field's lines are one value, joined with commas; blank lines add nothing.
    assert accept_value(lines) == value


@pytest.mark.parametrize(
    ("lines", "token"),
    [
        ([], None),
        ([""], None),
        (["Bearer t"], "t"),
        (["Bearer t", "bearer  t", ""], "t"),  # one credential, written twice
        (["Basic t"], None),
        (["Basic t", "Basic t"], None),
        (["Bearer t", "Bearer u"], TWO_CREDENTIALS),
        (["Bearer t", "Basic t"], TWO_CREDENTIALS),
        (["t", "Bearer t"], TWO_CREDENTIALS),  # a scheme named like the token is another credential
        (["Bearer t", "t"], TWO_CREDENTIALS),
    ],
)
def test_authorization_lines_carry_one_credential_or_none(lines: list[str], token: str | None) -> None:
    assert supplied_token(lines) == token
    assert TWO_CREDENTIALS.strip() != TWO_CREDENTIALS  # no bearer token read from a header equals it
