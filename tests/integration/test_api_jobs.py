"""POST /jobs and the job projection over HTTP, against a real worker, Temporal and PostgreSQL.

Admission and idempotency (reference §1.1–1.2), validation order (§1.5), target
selection (§9.6), the enforced deadline, the Job fields (§1.3–1.4), cancel's protocol
shape (§3) and capabilities (§1.7). Every answer is checked against the published
schema by the client's response hook (tests/schema.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from temporalio.client import Client

from tests.conftest import StackFactory
from tests.fakes.webhook import Reply, WebhookReceiver
from tests.support import Stack, eventually, short_id, terminal_job, whsec

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def config(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    out = f"out-{short_id()}"
    base: dict[str, Any] = {
        "api": {"callback_allowed_hosts": ["hooks.example.org"], "callback_secret": whsec()},
        "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
        "targets": [
            {"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out]},
            {"id": "hidden", "query": {"tags": ["風景"]}, "routes": [out], "accept_jobs": False},
        ],
    }
    base.update(extra)
    return base


@pytest.fixture(scope="module")
async def stack(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, database_url: str, ledger_pool: Any
) -> AsyncIterator[Stack]:
    """One stack (worker + API) shared by this module's tests; each test uses its own keys."""
    tmp = tmp_path_factory.mktemp("jobs")
    stack = Stack(tmp, temporal_address, database_url, config(tmp))
    await stack.start_worker()
    await stack.start_api()
    yield stack
    await stack.stop()


def task(key: str, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "params": {"query": {"tags": ["オリジナル"]}},
    }
    body.update(fields)
    return body


async def jobs_with_prefix(stack: Stack, prefix: str) -> int:
    pool = await stack.ledger()
    return int(await pool.fetchval("SELECT count(*) FROM jobs WHERE idempotency_key LIKE $1", prefix + "%"))


# ---- admission and idempotency --------------------------------------------------------


async def test_replay_answers_200_with_the_identical_body_and_first_write_wins(stack: Stack) -> None:
    http = stack.http
    assert http is not None
    key = f"Replay-{short_id()}"
    first = await http.post("/jobs", json=task(f"  {key} ", correlation_id="first-corr"))
    assert first.status_code == 202
    job = first.json()["job"]
    assert job["job_id"] == f"demo@manual-{key.lower()}" and job["idempotency_key"] == key
    assert job["status"] == "queued" and job["correlation_id"] == "first-corr"

    replay = await http.post("/jobs", json=task(key, correlation_id="first-corr"))
    assert replay.status_code == 200 and replay.content == first.content
    await terminal_job(http, job["job_id"])
    # after the job ran, a replay still answers the first admission's body, byte for byte;
    # a different correlation_id / callback_url is accepted but not stored (first write wins)
    later = await http.post(
        "/jobs", json=task(key, correlation_id="second-corr", callback_url="https://hooks.example.org/x")
    )
    assert later.status_code == 200 and later.content == first.content
    current = (await http.get(f"/jobs/{job['job_id']}")).json()
    assert current["correlation_id"] == "first-corr"
    pool = await stack.ledger()
    row = await pool.fetchrow("SELECT correlation_id, callback_url FROM jobs WHERE job_id = $1", job["job_id"])
    assert (row["correlation_id"], row["callback_url"]) == ("first-corr", None)
    assert await pool.fetchval("SELECT count(*) FROM event_pushes WHERE job_id = $1", job["job_id"]) == 0

    # different params → 409; keys differing only in case → 409; nothing new is created
    other = await http.post("/jobs", json=task(key, params={"query": {"tags": ["風景"]}}))
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_conflict"
    assert other.json()["error"]["detail"]["reason"] == "idempotency_conflict"
    assert other.json()["error"]["retryable"] is False
    variant = await http.post("/jobs", json=task(key.lower()))
    assert variant.status_code == 409 and variant.json()["error"]["code"] == "idempotency_conflict"
    assert await jobs_with_prefix(stack, "Replay-") + await jobs_with_prefix(stack, "replay-") >= 1
    assert await pool.fetchval("SELECT count(*) FROM jobs WHERE lower(idempotency_key) = $1", key.lower()) == 1

    # lookup by key: exact and case-sensitive
    found = (await http.get("/jobs", params={"idempotency_key": key})).json()
    assert [j["job_id"] for j in found["jobs"]] == [job["job_id"]]
    assert (await http.get("/jobs", params={"idempotency_key": key.lower()})).json()["jobs"] == []
    missing = await http.get("/jobs")
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "invalid_params"
    assert missing.json()["error"]["detail"]["field"] == "idempotency_key"


async def test_fifty_concurrent_posts_with_one_key_make_one_job(stack: Stack, temporal_client: Client) -> None:
    http = stack.http
    assert http is not None
    key = f"burst-{short_id()}"
    answers = await asyncio.gather(*(http.post("/jobs", json=task(key)) for _ in range(50)))

    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] * 49 + [202]
    assert len({a.content for a in answers}) == 1
    job_id = answers[0].json()["job"]["job_id"]
    pool = await stack.ledger()
    assert await pool.fetchval("SELECT count(*) FROM jobs WHERE idempotency_key = $1", key) == 1
    await terminal_job(http, job_id)

    async def runs() -> list[Any]:  # visibility is eventually consistent
        return [w async for w in temporal_client.list_workflows(f"WorkflowId = '{job_id}'")]

    assert len(await eventually(runs, timeout_s=10, interval_s=0.2, what="the run listed")) == 1
    accepted = await pool.fetchval(
        "SELECT count(*) FROM job_events WHERE job_id = $1 AND type = 'job.accepted'", job_id
    )
    assert accepted == 1


# ---- validation -------------------------------------------------------------------------


class Raw:
    """A request body sent as is (not merged into a valid Task)."""

    def __init__(self, body: Any) -> None:
        self.body = body


REFUSALS: list[tuple[str, Any, int, str, dict[str, Any]]] = [
    # (name, body or override of a valid Task, http status, code, expected detail subset)
    # a JSON text that is no object names what it is (until 2026-12-07: no detail at all)
    ("array", Raw([1, 2]), 400, "invalid_params", {"reason": "not_an_object", "received": "array"}),
    ("string", Raw("task"), 400, "invalid_params", {"reason": "not_an_object", "received": "string"}),
    ("number", Raw(3), 400, "invalid_params", {"reason": "not_an_object", "received": "number"}),
    ("null", Raw(None), 400, "invalid_params", {"reason": "not_an_object", "received": "null"}),
    ("boolean", Raw(True), 400, "invalid_params", {"reason": "not_an_object", "received": "boolean"}),
    # a required member absent is named missing (until 2026-12-07 a Task without job_type was
    # "unsupported job_type", job_type null)
    ("no job_type", Raw({"protocol_version": "1", "idempotency_key": ""}), 400, "invalid_params",
     {"field": "job_type"}),
    ("null job_type", {"job_type": None}, 400, "invalid_params", {"field": "job_type"}),
    ("no key", Raw({"protocol_version": "1", "job_type": "candidate_search", "params": {"target_id": "demo"}}), 400,
     "invalid_params", {"field": "idempotency_key"}),
    # the first failure wins, everything after it being wrong too
    ("no protocol_version", Raw({"job_type": "nope", "idempotency_key": ""}), 400, "invalid_params",
     {"field": "protocol_version"}),
    ("null protocol_version", {"protocol_version": None}, 400, "invalid_params", {"field": "protocol_version"}),
    ("number version", Raw({"protocol_version": 1, "job_type": "nope"}), 400, "unsupported_protocol_version",
     {"received": 1, "supported": ["1"]}),
    ("version 2", {"protocol_version": "2"}, 400, "unsupported_protocol_version", {"supported": ["1"]}),
    ("job_type", Raw({"protocol_version": "1", "job_type": "other", "idempotency_key": ""}), 400, "invalid_params",
     {"reason": "unsupported_job_type", "supported": ["candidate_search"]}),
    ("key after job_type", {"job_type": "candidate_search", "idempotency_key": "", "deadline_ms": 1}, 400,
     "invalid_params", {"field": "idempotency_key"}),
    ("blank key", {"idempotency_key": "   "}, 400, "invalid_params", {"field": "idempotency_key"}),
    ("long key", {"idempotency_key": "k" * 201}, 400, "invalid_params", {"field": "idempotency_key"}),
    ("key type", {"idempotency_key": 5}, 400, "invalid_params", {"field": "idempotency_key"}),
    ("correlation", {"correlation_id": "c" * 201}, 400, "invalid_params", {"field": "correlation_id"}),
    ("callback long", {"callback_url": "https://hooks.example.org/" + "x" * 2000}, 400, "invalid_params",
     {"field": "callback_url"}),
    ("callback scheme", {"callback_url": "ftp://hooks.example.org/x"}, 400, "invalid_params",
     {"field": "callback_url"}),
    ("callback host", {"callback_url": "https://evil.example.com/x"}, 400, "invalid_params",
     {"reason": "callback_host_not_allowed"}),
    # the allow-list compares host and port: an allowed name on another port, or port 0, is refused
    ("callback port", {"callback_url": "https://hooks.example.org:8443/x"}, 400, "invalid_params",
     {"reason": "callback_host_not_allowed", "port": 8443}),
    ("callback port 0", {"callback_url": "https://hooks.example.org:0/x"}, 400, "invalid_params",
     {"reason": "callback_host_not_allowed"}),
    ("callback http port", {"callback_url": "http://hooks.example.org:443/x"}, 400, "invalid_params",
     {"reason": "callback_host_not_allowed"}),
    # a host the outbound layer (httpx) cannot parse is a bad URL, never a 500
    ("callback octal host", {"callback_url": "http://0177.0.0.2:1/"}, 400, "invalid_params",
     {"field": "callback_url"}),
    ("callback host 256", {"callback_url": "http://256.0.0.1/x"}, 400, "invalid_params", {"field": "callback_url"}),
    ("callback ipv6", {"callback_url": "http://[::1/x"}, 400, "invalid_params", {"field": "callback_url"}),
    ("deadline small", {"deadline_ms": 999}, 400, "invalid_params", {"field": "deadline_ms"}),
    ("deadline type", {"deadline_ms": "5000"}, 400, "invalid_params", {"field": "deadline_ms"}),
    ("deadline huge", {"deadline_ms": 10**20}, 400, "invalid_params", {"field": "deadline_ms"}),
    ("nul key", {"idempotency_key": "nul\x00key"}, 400, "invalid_params", {"field": "idempotency_key"}),
    ("nul tag", {"params": {"query": {"tags": ["a\x00"]}}}, 400, "invalid_params", {"field": "params.query.tags"}),
    ("nul label", {"labels": {"a": "\x00"}}, 400, "invalid_params", {"field": "labels"}),
    ("labels", {"labels": {"a": 1}}, 400, "invalid_params", {"field": "labels"}),
    ("no params", {"params": None}, 400, "invalid_params", {"field": "params"}),
    ("no query", {"params": {}}, 400, "invalid_params", {"field": "params.query"}),
    ("no tags", {"params": {"query": {"tags": []}}}, 400, "invalid_params", {"field": "params.query.tags"}),
    ("21 tags", {"params": {"query": {"tags": [f"t{i}" for i in range(21)]}}}, 400, "invalid_params",
     {"field": "params.query.tags"}),
    ("long tag", {"params": {"query": {"tags": ["x" * 101]}}}, 400, "invalid_params", {"field": "params.query.tags"}),
    ("blank tag", {"params": {"query": {"tags": [" "]}}}, 400, "invalid_params", {"field": "params.query.tags"}),
    ("exclude 101",
     {"params": {"query": {"tags": ["a"]}, "constraints": {"exclude": [{"kind": "work", "id": "1"}] * 101}}},
     400, "invalid_params", {"field": "params.constraints.exclude"}),
    ("exclude kind", {"params": {"query": {"tags": ["a"]}, "constraints": {"exclude": [{"kind": "user", "id": "1"}]}}},
     400, "invalid_params", {"field": "params.constraints.exclude"}),
    # a bad array item is named by its index (until 2026-12-08: one sentence for every item, no index)
    ("exclude item 17",
     {"params": {"query": {"tags": ["a"]},
                 "constraints": {"exclude": [{"kind": "work", "id": "1"}] * 17 + [{"kind": "work", "id": " "}]}}},
     400, "invalid_params", {"field": "params.constraints.exclude", "index": 17}),
    ("blank tag 2", {"params": {"query": {"tags": ["a", "b", " "]}}}, 400, "invalid_params",
     {"field": "params.query.tags", "index": 2}),
    ("work type 1", {"params": {"query": {"tags": ["a"]}, "constraints": {"work_types": ["illust", ""]}}}, 400,
     "invalid_params", {"field": "params.constraints.work_types", "index": 1}),
    ("limit 0", {"params": {"query": {"tags": ["a"]}, "constraints": {"limit": 0}}}, 400, "invalid_params",
     {"field": "params.constraints.limit"}),
    ("scan_limit 0", {"params": {"query": {"tags": ["a"]}, "constraints": {"scan_limit": 0}}}, 400, "invalid_params",
     {"field": "params.constraints.scan_limit"}),
    ("work_types", {"params": {"query": {"tags": ["a"]}, "constraints": {"work_types": [""]}}}, 400, "invalid_params",
     {"field": "params.constraints.work_types"}),
    ("platform", {"params": {"query": {"tags": ["a"]}, "source": {"platform": "x"}}}, 400, "invalid_params",
     {"field": "params.source.platform"}),
    ("account", {"params": {"query": {"tags": ["a"]}, "source": {"account": "someone-else"}}}, 400, "invalid_params",
     {"reason": "account_unavailable", "requested": "someone-else", "configured": "default"}),
    ("work type", {"params": {"query": {"tags": ["a"]}, "constraints": {"work_types": ["novel"]}}}, 400,
     "invalid_params", {"reason": "work_type_not_available", "target_type": "illustration"}),
    ("unknown target", {"params": {"target_id": "nope"}}, 404, "invalid_params", {"reason": "unknown_target"}),
    ("blank target", {"params": {"target_id": "  "}}, 400, "invalid_params", {"field": "params.target_id"}),
    ("target type", {"params": {"target_id": 7}}, 400, "invalid_params", {"field": "params.target_id"}),
    ("target off", {"params": {"target_id": "hidden"}}, 400, "invalid_params", {"reason": "target_not_eligible"}),
]  # fmt: skip


async def test_every_refusal_is_a_protocol_error_and_creates_nothing(stack: Stack) -> None:
    http = stack.http
    assert http is not None
    prefix = f"refuse-{short_id()}-"
    for name, override, status, code, detail in REFUSALS:
        body = override.body if isinstance(override, Raw) else task(prefix + name.replace(" ", "-"), **override)
        # its JSON text, written out: httpx sends no body at all for json=None
        answer = await http.post("/jobs", content=json.dumps(body), headers={"content-type": "application/json"})
        assert answer.status_code == status, (name, answer.text)
        error = answer.json()["error"]
        assert error["code"] == code, name
        assert error["retryable"] is False and error["message"], name
        assert all((error.get("detail") or {}).get(k) == v for k, v in detail.items()), (name, error)
    assert await jobs_with_prefix(stack, prefix) == 0


async def test_a_required_member_absent_is_refused_as_missing(stack: Stack) -> None:
    # Each required member of the schema's Task, absent, is named missing — never told a rule
    # of a value it never had ("unsupported job_type" of no job_type, until 2026-12-07).
    http = stack.http
    assert http is not None
    for member in ("job_type", "idempotency_key", "params"):
        body = task(f"missing-{short_id()}")
        del body[member]
        answer = await http.post("/jobs", json=body)
        assert answer.status_code == 400, (member, answer.text)
        detail: dict[str, object] = {"field": member}
        if member == "job_type":  # reference §1.5 step 3: every job_type but a supported one has this reason
            detail |= {"reason": "unsupported_job_type", "job_type": None, "supported": ["candidate_search"]}
        assert answer.json()["error"] == {
            "code": "invalid_params",
            "message": f"{member} is required",
            "retryable": False,
            "detail": detail,
        }


async def test_raw_bodies_get_protocol_errors_never_framework_shapes(stack: Stack) -> None:
    http = stack.http
    assert http is not None
    json_type = {"content-type": "application/json"}
    for content, reason in (
        (b"{not json", "invalid_json"),
        (b"", "empty_body"),  # until 2026-12-07 this one refusal named no reason
        (b"   ", "empty_body"),
        (b"\xff\xfe", "not_utf8"),
        (b'{"protocol_version": "1",', "invalid_json"),
        (b"[]", "not_an_object"),
    ):
        answer = await http.post("/jobs", content=content, headers=json_type)
        assert answer.status_code == 400, content
        assert answer.json()["error"]["code"] == "invalid_params"
        assert answer.json()["error"]["detail"]["reason"] == reason, (content, answer.text)
    big = task(f"big-{short_id()}", labels={"pad": "x" * 70_000})
    too_big = await http.post("/jobs", json=big)
    assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "invalid_params"

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the limit holds on the stream
        for _ in range(100):
            yield b" " * 1024

    chunked = await http.post("/jobs", content=chunks(), headers=json_type)
    assert chunked.status_code == 413
    # ids no job can have (a NUL character) are unknown, not a 500
    for method, path in (("GET", "/jobs/a%00b"), ("GET", "/jobs/a%00b/events"), ("POST", "/jobs/a%00b/cancel")):
        assert (await http.request(method, path)).status_code == 404, path
    nul_ack = await http.post("/jobs/a%00b/events/ack", json={"ack_through": "evt-1-00000000"})
    assert nul_ack.status_code == 404
    assert (await http.get("/jobs", params={"idempotency_key": "a\x00"})).json()["jobs"] == []
    # unknown paths and methods answer protocol errors too
    assert (await http.get("/no/such/route")).json()["error"]["code"] == "invalid_params"
    assert (await http.delete("/jobs")).status_code == 405
    # unknown fields are ignored at every level
    key = f"extra-{short_id()}"
    body = task(key, surprise={"x": 1}, params={"query": {"tags": ["オリジナル"], "mood": "calm"}, "weird": [1]})
    accepted = await http.post("/jobs", json=body)
    assert accepted.status_code == 202, accepted.text


# ---- target selection ---------------------------------------------------------------------


async def test_target_only_request_runs_the_target_as_configured(stack: Stack) -> None:
    http = stack.http
    assert http is not None
    key = f"target-only-{short_id()}"
    body = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "params": {"target_id": "demo"},
    }
    answer = await http.post("/jobs", json=body)
    assert answer.status_code == 202, answer.text
    job = await terminal_job(http, answer.json()["job"]["job_id"])
    assert job["status"] == "succeeded"
    # its candidate's recall basis is the target's seed tag, not every tag of the work
    # (protocol v1 Candidate.tags; until 2026-12-06 each of the work's tags was a "seed")
    seed = {"tag": "オリジナル", "source": "seed", "weight": 1.0}
    assert [c["tags"] for c in job["result"]["candidates"]] == [[seed]]
    events = (await http.get(job["events_url"])).json()["events"]
    assert events[-1]["payload"]["result"]["candidates"][0]["tags"] == [seed]
    # a seed the source matched inside a tag (Pixiv's partial match) is the basis too
    partial = dict(body, idempotency_key=key + "-p", params={"target_id": "demo", "query": {"tags": ["オリジ"]}})
    found = await terminal_job(http, (await http.post("/jobs", json=partial)).json()["job"]["job_id"])
    assert found["status"] == "succeeded"
    assert found["result"]["candidates"][0]["tags"] == [{"tag": "オリジ", "source": "seed", "weight": 1.0}]
    pool = await stack.ledger()
    stored = await pool.fetchrow(
        "SELECT params, workflow_input FROM jobs WHERE job_id = $1", answer.json()["job"]["job_id"]
    )
    assert stored["params"] == {}  # the selector is not part of the retrieval view
    assert stored["workflow_input"]["targets"][0]["query"]["tags"] == ["オリジナル"]
    # an explicit query overrides the tags for this job only
    override = dict(body, idempotency_key=key + "-q", params={"target_id": "demo", "query": {"tags": ["風景"]}})
    second = await http.post("/jobs", json=override)
    assert second.status_code == 202
    tags = await pool.fetchval(
        "SELECT workflow_input->'targets'->0->'query'->'tags' FROM jobs WHERE job_id = $1",
        second.json()["job"]["job_id"],
    )
    assert tags == ["風景"]
    assert stack.settings.target("demo").query.tags == ["オリジナル"]  # type: ignore[union-attr]


async def test_several_or_no_eligible_targets(make_stack: StackFactory, tmp_path: Path) -> None:
    out = f"out-{short_id()}"
    routes = {out: {"kind": "directory", "path": str(tmp_path / "d")}}
    several = make_stack(
        {
            "routes": routes,
            "targets": [
                {"id": "alpha", "routes": [out]},
                {"id": "beta", "routes": [out]},
                {"id": "gamma", "routes": [out], "accept_jobs": False},
            ],
        }
    )
    http = await several.start_api()
    ambiguous = await http.post("/jobs", json=task(f"amb-{short_id()}"))
    assert ambiguous.status_code == 409
    error = ambiguous.json()["error"]
    assert error["code"] == "invalid_params"
    assert error["detail"]["reason"] == "ambiguous_target" and error["detail"]["targets"] == ["alpha", "beta"]
    chosen = await http.post("/jobs", json=task(f"amb-{short_id()}", params={"target_id": "beta"}))
    assert chosen.status_code == 202 and chosen.json()["job"]["job_id"].startswith("beta@manual-")

    none = make_stack({"routes": routes, "targets": [{"id": "alpha", "routes": [out], "accept_jobs": False}]})
    http2 = await none.start_api()
    refused = await http2.post("/jobs", json=task(f"none-{short_id()}"))
    assert refused.status_code == 400
    assert refused.json()["error"]["detail"]["reason"] == "no_eligible_target"


# ---- deadline, projection, cancel, capabilities -------------------------------------------------


async def test_deadline_ms_is_enforced(make_stack: StackFactory, webhook: WebhookReceiver) -> None:
    hook = f"hook-{short_id()}"
    webhook.script["/slow"] = [Reply(503, delay_s=7.0)] * 3  # answers after the deadline
    stack = make_stack(
        {
            "routes": {hook: {"kind": "webhook", "url": webhook.url + "/slow", "secret": whsec()}},
            "targets": [{"id": "demo", "routes": [hook]}],
        }
    )
    await stack.start_worker()
    http = await stack.start_api()
    # 5 s leaves a loaded machine time to reach the send before the deadline
    answer = await http.post("/jobs", json=task(f"deadline-{short_id()}", deadline_ms=5000))
    admitted = answer.json()["job"]
    assert admitted["deadline_at"] == admitted["created_at"] + 5000

    job = await terminal_job(http, admitted["job_id"], timeout_s=30)

    assert job["status"] == "expired"
    assert job["error"]["code"] == "deadline_exceeded" and job["error"]["retryable"] is True
    assert job["error"]["detail"]["internal_code"] == "execution_timeout"
    assert job["deadline_at"] == admitted["created_at"] + 5000
    assert job["updated_at"] >= job["deadline_at"]
    assert job["progress"]["stage"] == "expired"
    assert webhook.at("/slow"), "the delivery was under way when the deadline passed"
    events = (await http.get(f"/jobs/{admitted['job_id']}/events")).json()["events"]
    assert events[-1]["type"] == "job.expired"
    assert events[-1]["payload"]["error"]["code"] == "deadline_exceeded"


async def test_job_fields_while_running_and_when_done(make_stack: StackFactory, webhook: WebhookReceiver) -> None:
    hook = f"hook-{short_id()}"
    webhook.script["/hold"] = [Reply(200, delay_s=3.0)]
    stack = make_stack(
        {
            "routes": {hook: {"kind": "webhook", "url": webhook.url + "/hold", "secret": whsec()}},
            "targets": [{"id": "demo", "routes": [hook]}],
        }
    )
    await stack.start_worker()
    http = await stack.start_api()
    key = f"fields/{short_id()}?x"  # a key with '/' and '?': the job id is still addressable
    answer = await http.post("/jobs", json=task(key))
    job_id = answer.json()["job"]["job_id"]
    path = f"/jobs/{quote(job_id, safe='@')}"
    assert answer.json()["job"]["events_url"] == f"{path}/events"

    async def delivering() -> dict[str, Any] | None:
        # the send arrived before this read: its step (and lease) committed before it left
        held = bool(webhook.at("/hold"))
        job: dict[str, Any] = (await http.get(path)).json()
        return job if held and job["progress"]["stage"] == "delivering" else None

    running = await eventually(delivering, what="the send held while delivering")
    now = int(time.time() * 1000)
    assert running["status"] == "running"
    assert running["started_at"] is not None and running["started_at"] >= running["created_at"]
    assert running["heartbeat_at"] is not None and now - running["heartbeat_at"] < 5000
    assert running["lease_active"] is True and running["lease_expires_at"] > now
    assert running["attempt"] >= 1
    assert "result" not in running and "error" not in running

    done = await terminal_job(http, job_id)
    assert done["status"] == "succeeded" and done["progress"]["stage"] == "done"
    assert done["lease_active"] is False and done["lease_expires_at"] is None
    result = done["result"]
    candidate = result["candidates"][0]
    assert candidate["platform"] == "pixiv" and candidate["work_type"] == "illustration"
    assert candidate["candidate_id"] == candidate["work_id"]
    assert candidate["url"].startswith("https://www.pixiv.net/")
    assert [t["tag"] for t in candidate["tags"]] == ["オリジナル"]
    assert candidate["assets"] and candidate["assets"][0]["locator"]["kind"] == "path"
    assert result["scanned"] >= 1 and isinstance(result["filtered"], list)
    events = (await http.get(done["events_url"])).json()["events"]
    assert events[-1]["type"] == "job.succeeded"

    failed_id = await http.post("/jobs", json=task(f"nothing-{short_id()}", params={"query": {"tags": ["zz-none"]}}))
    failed = await terminal_job(http, failed_id.json()["job"]["job_id"])
    assert failed["status"] == "failed" and "result" not in failed
    assert failed["error"]["code"] == "no_candidate" and failed["error"]["retryable"] is True
    assert failed["error"]["detail"]["internal_code"] == "no_candidate"
    assert failed["error"]["message"] and "_" not in failed["error"]["message"]


async def test_cancel_answers_the_bare_job_and_repeats_identically(make_stack: StackFactory, tmp_path: Path) -> None:
    stack = make_stack(config(tmp_path))  # no worker: the job waits in its queue
    http = await stack.start_api()
    job_id = (await http.post("/jobs", json=task(f"cancel-{short_id()}"))).json()["job"]["job_id"]

    first = await http.post(f"/jobs/{job_id}/cancel", content=b"ignored, not even JSON")
    assert first.status_code == 200
    job = first.json()
    assert job["job_id"] == job_id and job["status"] == "cancelled"
    assert job["error"] == {
        "code": "cancelled_by_consumer",
        "message": job["error"]["message"],
        "retryable": False,
        "detail": {"internal_code": "cancelled_by_consumer", "deliveries": []},
    }
    assert job["progress"]["stage"] == "cancelled"
    again = await http.post(f"/jobs/{job_id}/cancel")
    assert again.status_code == 200 and again.content == first.content
    assert (await http.get(f"/jobs/{job_id}")).json() == job
    unknown = await http.post("/jobs/demo@manual-never-admitted/cancel")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "invalid_params"
    assert unknown.json()["error"]["detail"]["reason"] == "unknown_job"
    events = (await http.get(f"/jobs/{job_id}/events")).json()["events"]
    assert [e["type"] for e in events] == ["job.accepted", "job.cancelled"]


async def test_capabilities_reflect_the_live_configuration(make_stack: StackFactory, tmp_path: Path) -> None:
    default = make_stack(config(tmp_path))
    http = await default.start_api()
    caps = (await http.get("/capabilities")).json()
    assert caps["protocol_versions"] == ["1"]
    declared = caps["job_types"][0]
    assert declared["name"] == "candidate_search"
    assert declared["params_schema"] == "#/$defs/CandidateSearchParams"
    assert {"events", "progress", "cancel", "idempotency"} <= set(declared["features"])
    assert "target_selector" not in declared["features"]  # outside v1's closed enum
    assert declared["extended_features"] == ["target_selector"]
    assert (declared["queued_timeout_ms"], declared["stall_timeout_ms"]) == (1_800_000, 900_000)
    assert (declared["heartbeat_interval_ms"], declared["default_deadline_ms"]) == (1000, 1_800_000)
    assert abs(caps["server_time"] - time.time() * 1000) < 5000

    tuned = make_stack(
        config(
            tmp_path,
            budgets={
                "queued_timeout_ms": 120_000,
                "stall_timeout_ms": 59_999,  # below the 60 s floor: falls back to the default
                "heartbeat_interval_ms": 5000,
                "default_deadline_ms": 600_000,
            },
        )
    )
    http2 = await tuned.start_api()
    declared2 = (await http2.get("/capabilities")).json()["job_types"][0]
    assert (declared2["queued_timeout_ms"], declared2["stall_timeout_ms"]) == (120_000, 900_000)
    assert (declared2["heartbeat_interval_ms"], declared2["default_deadline_ms"]) == (5000, 600_000)
    admitted = (await http2.post("/jobs", json=task(f"caps-{short_id()}"))).json()["job"]
    assert admitted["deadline_at"] == admitted["created_at"] + 600_000
