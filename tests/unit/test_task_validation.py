"""Task validation order and normalisation (reference §1.5)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from curaflow.protocol.errors import ProtocolError
from curaflow.protocol.models import Task
from curaflow.protocol.task import oversized_task, validate_task


def task(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": "key-1",
        "params": {"query": {"tags": ["a"]}},
    }
    body.update(overrides)
    return body


def refused(body: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as err:
        validate_task(body)
    return err.value


def test_first_failure_wins_in_the_original_order() -> None:
    err = refused({"job_type": "x", "idempotency_key": ""})
    assert (err.code, err.http_status, err.detail.get("field")) == ("invalid_params", 400, "protocol_version")
    err = refused({"protocol_version": 1, "job_type": "x"})
    assert err.code == "unsupported_protocol_version"
    assert err.detail == {"received": 1, "supported": ["1"]}
    err = refused(task(job_type="other", idempotency_key=""))
    assert err.detail["reason"] == "unsupported_job_type"
    assert refused(task(idempotency_key="   ")).detail["field"] == "idempotency_key"
    assert refused(task(idempotency_key="x" * 201)).detail["field"] == "idempotency_key"
    assert refused(task(correlation_id=5)).detail["field"] == "correlation_id"
    assert refused(task(deadline_ms=999)).detail["field"] == "deadline_ms"
    assert refused(task(labels={"a": 1})).detail["field"] == "labels"
    assert refused([1, 2]).code == "invalid_params"


def test_params_rules() -> None:
    assert refused(task(params={"query": {"tags": []}})).detail["field"] == "params.query.tags"
    assert refused(task(params={"query": {"tags": ["a"] * 21}})).detail["field"] == "params.query.tags"
    assert refused(task(params={"query": {"tags": [" "]}})).detail["field"] == "params.query.tags"
    assert refused(task(params={"query": {"tags": ["x" * 101]}})).detail["field"] == "params.query.tags"
    assert (
        refused(task(params={"query": {"tags": ["a"]}, "source": {"platform": "x"}})).detail["field"]
        == "params.source.platform"
    )
    bad_exclude = {"query": {"tags": ["a"]}, "constraints": {"exclude": [{"kind": "user", "id": "1"}]}}
    assert refused(task(params=bad_exclude)).detail["field"] == "params.constraints.exclude"
    assert refused(task(params={"query": {"tags": ["a"]}, "constraints": {"limit": 0}})).code == "invalid_params"
    assert refused(task(params={})).detail["field"] == "params.query"
    assert refused(task(params={"target_id": "  "})).detail["field"] == "params.target_id"
    assert refused(task(params={"target_id": 3})).detail["field"] == "params.target_id"


def test_normalised_view_is_rebuilt_in_fixed_order() -> None:
    body = task(
        idempotency_key="  spaced  ",
        correlation_id="",
        unknown_field=True,
        params={
            "constraints": {"scan_limit": 500, "exclude": [{"kind": "work", "id": " 42 "}], "other": 1},
            "query": {"tags": [" a ", "b"], "expand": False},
            "source": {"platform": "pixiv", "account": " default "},
        },
    )
    validated = validate_task(body)
    assert validated.idempotency_key == "spaced"
    assert validated.correlation_id is None
    assert list(validated.params) == ["source", "query", "constraints"]
    assert validated.params["query"] == {"tags": ["a", "b"]}
    assert validated.params["constraints"] == {"exclude": [{"kind": "work", "id": "42"}], "scan_limit": 100}
    assert validated.params["source"] == {"platform": "pixiv", "account": "default"}


def test_target_only_task_is_valid() -> None:
    validated = validate_task(
        {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": "k",
            "params": {"target_id": "demo"},
        }
    )
    assert validated.target_id == "demo" and validated.params == {}


def test_what_the_ledger_cannot_store_is_refused_not_a_500() -> None:
    assert refused(task(deadline_ms=10**20)).detail["field"] == "deadline_ms"
    assert refused(task(deadline_ms=7 * 24 * 3600 * 1000 + 1)).detail["field"] == "deadline_ms"
    assert validate_task(task(deadline_ms=7 * 24 * 3600 * 1000)).deadline_ms == 604_800_000
    assert refused(task(idempotency_key="a\x00b")).detail["field"] == "idempotency_key"
    assert refused(task(correlation_id="c\x00")).detail["field"] == "correlation_id"
    assert refused(task(callback_url="https://h.example/\x00")).detail["field"] == "callback_url"
    # hosts httpx (the outbound layer) cannot parse: a 400 here, never a 500 at admission
    for url in (
        "http://0177.0.0.2:1/",
        "http://256.0.0.1/x",
        "http://1.2.3.999/",
        "https://[::1/x",
        "http://[fe80::1%/",
    ):
        assert refused(task(callback_url=url)).detail["field"] == "callback_url", url
    assert refused(task(labels={"k\x00": "v"})).detail["field"] == "labels"
    assert refused(task(labels={"k": "v\x00"})).detail["field"] == "labels"
    assert refused(task(params={"query": {"tags": ["a\x00"]}})).detail["field"] == "params.query.tags"
    assert refused(task(params={"target_id": "d\x00"})).detail["field"] == "params.target_id"
    exclude = {"query": {"tags": ["a"]}, "constraints": {"exclude": [{"kind": "work", "id": "1\x00"}]}}
    assert refused(task(params=exclude)).detail["field"] == "params.constraints.exclude"
    # other control characters are storable and accepted, except in the key, which the
    # job id embeds: a key the API could not address is refused
    assert validate_task(task(correlation_id="\x01c")).correlation_id == "\x01c"
    for key in ("\x01k", "a\nb", "a\r\nb", "t\tab", "\x7fk", "nel\x85k"):
        assert refused(task(idempotency_key=key)).detail["field"] == "idempotency_key", repr(key)
    assert validate_task(task(idempotency_key="a/b?c#d%e\u2028f")).idempotency_key == "a/b?c#d%e\u2028f"
    assert validate_task(task(idempotency_key="order-1\r\n")).idempotency_key == "order-1"  # trimmed first


@pytest.mark.parametrize("bad", ["\x00", "\ud800"])
@pytest.mark.parametrize(
    ("field", "body"),
    [
        ("idempotency_key", lambda bad: task(idempotency_key=f"k{bad}")),
        ("correlation_id", lambda bad: task(correlation_id=f"c{bad}")),
        ("callback_url", lambda bad: task(callback_url=f"https://h.example/{bad}")),
        ("labels", lambda bad: task(labels={"k": f"v{bad}"})),
        ("labels", lambda bad: task(labels={f"k{bad}": "v"})),
        ("params.target_id", lambda bad: task(params={"target_id": f"d{bad}"})),
        ("params.source.account", lambda bad: task(params={"query": {"tags": ["a"]}, "source": {"account": bad}})),
        ("params.query.tags", lambda bad: task(params={"query": {"tags": [f"a{bad}"]}})),
        (
            "params.constraints.exclude",
            lambda bad: task(
                params={"query": {"tags": ["a"]}, "constraints": {"exclude": [{"kind": "work", "id": bad}]}}
            ),
        ),
        (
            "params.constraints.work_types",
            lambda bad: task(params={"query": {"tags": ["a"]}, "constraints": {"work_types": [bad]}}),
        ),
    ],
)
def test_a_string_the_ledger_cannot_store_is_refused_saying_why(field: str, body: Any, bad: str) -> None:
    # A short string holding a NUL or a lone surrogate (JSON carries both, PostgreSQL text
    # stores neither) is refused naming its member — and its message says why: until
    # 2026-12-07 it said only the rule's length or shape ("a string of at most 200
    # characters" of a 2-character correlation id, "a non-blank string" of a tag "a\x00").
    err = refused(body(bad))
    assert (err.code, err.detail["field"]) == ("invalid_params", field)
    assert "NUL or a lone surrogate" in err.message, err.message


def test_a_task_is_measured_as_its_compact_utf8_json() -> None:
    # The rule POST /jobs applies to its body, for a Task that came another way
    # (Temporal, a parent workflow, follow_job, Nexus, curaflow run).
    body = task(labels={"note": "é" * 10})
    size = len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())
    assert oversized_task(body, size) is None
    refusal = oversized_task(body, size - 1)
    assert refusal is not None
    assert (refusal.code, refusal.http_status, refusal.detail) == (
        "invalid_params",
        413,
        {"limit": size - 1, "size": size},
    )
    assert oversized_task(Task.model_validate(body), size) is None  # a Task measures as its JSON
    assert oversized_task(object(), 1) is None  # not JSON: validation's to refuse


@pytest.mark.parametrize(
    "body",
    [
        task(protocol_version="\ud800"),
        task(job_type="x\udfff"),
        task(job_type={"\ud800": ["\udc00"]}),
    ],
)
def test_a_refusal_naming_a_lone_surrogate_can_be_encoded(body: dict[str, Any]) -> None:
    # the refusal echoes what was sent (detail.received / detail.job_type): it was a 500
    answer = refused(body).body()

    encoded = json.dumps(answer, ensure_ascii=False).encode("utf-8")

    assert "\ufffd" in encoded.decode()


@pytest.mark.parametrize("number", [60000.0, 6e4])
def test_an_integer_written_with_a_fraction_or_an_exponent_is_an_integer(number: float) -> None:
    # JSON has one number type: 6e4 and 60000.0 are the integer 60000 to the protocol's schema
    # ("type": "integer" accepts any number whose fraction is zero) and to the original (a JS
    # number); they were refused "deadline_ms must be an integer"
    constraints = {"limit": number / 10000, "scan_limit": number / 1000}
    validated = validate_task(task(deadline_ms=number, params={"query": {"tags": ["a"]}, "constraints": constraints}))
    spelled_as_ints = validate_task(
        task(deadline_ms=60000, params={"query": {"tags": ["a"]}, "constraints": {"limit": 6, "scan_limit": 60}})
    )

    assert validated.deadline_ms == 60000 and type(validated.deadline_ms) is int
    # one request, however its numbers are written: a replay compares these params
    assert validated.params == spelled_as_ints.params
    assert json.dumps(validated.params) == json.dumps(spelled_as_ints.params)


@pytest.mark.parametrize("number", [60000.5, True, "60000", -0.0, 1e300])
def test_a_number_that_is_no_integer_in_range_is_still_refused(number: Any) -> None:
    assert refused(task(deadline_ms=number)).detail["field"] == "deadline_ms"


@pytest.mark.parametrize(
    ("body", "received"),
    [([], "array"), ([1, 2], "array"), ("task", "string"), (3, "number"), (1.5, "number"), (None, "null"),
     (True, "boolean")],
)  # fmt: skip
def test_a_body_that_is_no_object_is_refused_naming_what_it_is(body: Any, received: str) -> None:
    # Every other malformed body names its reason (not_utf8, invalid_json …); this one
    # answered 400 with no detail at all until 2026-12-07.
    err = refused(body)

    assert (err.code, err.http_status, err.message) == ("invalid_params", 400, "request body must be a JSON object")
    assert err.detail == {"reason": "not_an_object", "received": received}


def _without(path: str) -> dict[str, Any]:
    body = task(params={"query": {"tags": ["a"]}})
    *parents, name = path.split(".")
    holder = body
    for parent in parents:
        holder = holder[parent]
    del holder[name]
    return body


def _null(path: str) -> dict[str, Any]:
    body = task(params={"query": {"tags": ["a"]}})
    *parents, name = path.split(".")
    holder = body
    for parent in parents:
        holder = holder[parent]
    holder[name] = None
    return body


REQUIRED = ["protocol_version", "job_type", "idempotency_key", "params", "params.query", "params.query.tags"]


@pytest.mark.parametrize("member", REQUIRED)
@pytest.mark.parametrize("how", [_without, _null], ids=["absent", "null"])
def test_a_required_member_absent_or_null_is_named_missing(member: str, how: Any) -> None:
    # The schema's required members (and params.query, required without params.target_id):
    # absent or null, each is refused as missing, naming itself. Until 2026-12-07 a Task
    # without job_type was "unsupported job_type" (job_type null, as if null were a type),
    # and a missing key, params or tags were told the rule of a value they never had.
    err = refused(how(member))

    assert (err.code, err.http_status) == ("invalid_params", 400)
    assert err.message == f"{member} is required"
    if member == "job_type":  # reference §1.5 step 3: every job_type but a supported one has this reason
        assert err.detail == {
            "field": "job_type",
            "reason": "unsupported_job_type",
            "job_type": None,
            "supported": ["candidate_search"],
        }
    else:
        assert err.detail == {"field": member}


def test_a_missing_member_is_named_in_the_original_order() -> None:
    # first failure wins: a missing job_type before a blank key, a missing key before bad labels
    assert refused({"protocol_version": "1", "idempotency_key": ""}).detail["field"] == "job_type"
    err = refused({"protocol_version": "1", "job_type": "candidate_search", "labels": 5})
    assert err.detail == {"field": "idempotency_key"}


@pytest.mark.parametrize(
    ("member", "value"),
    [("job_type", 3), ("job_type", ["candidate_search"]), ("job_type", "")],
)
def test_a_job_type_present_but_no_type_is_still_unsupported(member: str, value: Any) -> None:
    # reference §1.5 step 3: any value present other than a supported type
    assert refused(task(**{member: value})).detail["reason"] == "unsupported_job_type"


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"idempotency_key": 5}, "idempotency_key"),
        ({"params": []}, "params"),
        ({"params": "x"}, "params"),
        ({"params": {"query": []}}, "params.query"),
        ({"params": {"query": {"tags": "a"}}}, "params.query.tags"),
        ({"params": {"query": {"tags": ["a"]}, "source": []}}, "params.source"),
        ({"params": {"query": {"tags": ["a"]}, "constraints": "x"}}, "params.constraints"),
        ({"params": {"query": {"tags": ["a"]}, "constraints": {"exclude": {}}}}, "params.constraints.exclude"),
        # (an item of the wrong type is named by its index: test_a_refused_array_item_is_named_by_its_index)
        ({"params": {"query": {"tags": ["a"]}, "constraints": {"exclude": 3}}}, "params.constraints.exclude"),
        ({"params": {"query": {"tags": ["a"]}, "constraints": {"limit": "3"}}}, "params.constraints.limit"),
        ({"params": {"query": {"tags": ["a"]}, "constraints": {"work_types": "x"}}}, "params.constraints.work_types"),
        ({"params": {"query": {"tags": ["a"], "expand": "yes"}}}, "params.query.expand"),
    ],
)
def test_a_member_of_the_wrong_json_type_is_told_its_rule_not_missing(override: dict[str, Any], field: str) -> None:
    err = refused(task(**override))

    assert err.detail == {"field": field}
    assert err.message.startswith(field), err.message
    assert "required" not in err.message, err.message


def _exclude(items: list[Any]) -> dict[str, Any]:
    return task(params={"query": {"tags": ["a"]}, "constraints": {"exclude": items}})


GOOD_EXCLUDE = {"kind": "work", "id": "1"}


@pytest.mark.parametrize(
    ("body", "where", "index"),
    [
        # each bad exclude item among good ones: its kind, its id, its shape
        (_exclude([GOOD_EXCLUDE] * 17 + [{"kind": "user", "id": "1"}] + [GOOD_EXCLUDE] * 5), "exclude[17].kind", 17),
        (_exclude([GOOD_EXCLUDE] * 3 + [{"id": "1"}]), "exclude[3].kind", 3),
        (_exclude([GOOD_EXCLUDE, {"kind": "work", "id": " "}]), "exclude[1].id", 1),
        (_exclude([GOOD_EXCLUDE, {"kind": "tag", "id": "x" * 101}]), "exclude[1].id", 1),
        (_exclude([GOOD_EXCLUDE] * 2 + [{"kind": "work", "id": "1\x00"}]), "exclude[2].id", 2),
        (_exclude([GOOD_EXCLUDE] * 2 + [{"kind": "work", "id": 7}]), "exclude[2].id", 2),
        (_exclude([GOOD_EXCLUDE] * 2 + [{"kind": "work"}]), "exclude[2].id", 2),
        (_exclude([GOOD_EXCLUDE] * 4 + [3]), "exclude[4]", 4),
        (_exclude([GOOD_EXCLUDE] * 4 + [None]), "exclude[4]", 4),
        # the first bad item wins
        (_exclude([GOOD_EXCLUDE, {"kind": "x", "id": "1"}, {"kind": "y", "id": "2"}]), "exclude[1].kind", 1),
        # the Task's other arrays
        (task(params={"query": {"tags": ["a", "b", " "]}}), "tags[2]", 2),
        (task(params={"query": {"tags": ["a", "x" * 101]}}), "tags[1]", 1),
        (task(params={"query": {"tags": ["a", 5, " "]}}), "tags[1]", 1),
        (task(params={"query": {"tags": ["a\ud800"]}}), "tags[0]", 0),
        (task(params={"query": {"tags": ["a"]}, "constraints": {"work_types": ["illust", ""]}}), "work_types[1]", 1),
        (task(params={"query": {"tags": ["a"]}, "constraints": {"work_types": ["illust", 3]}}), "work_types[1]", 1),
        (task(params={"query": {"tags": ["a"]}, "constraints": {"work_types": ["a\x00"]}}), "work_types[0]", 0),
    ],
)
def test_a_refused_array_item_is_named_by_its_index(body: dict[str, Any], where: str, index: int) -> None:
    # A consumer with many items must find the bad one: each refusal of an array item names
    # its index in the message and in detail.index (until 2026-12-08 every bad exclude item
    # was told one sentence, "each exclude item needs kind …", and detail.field alone).
    err = refused(body)

    member = where.split("[")[0]
    field = {"exclude": "params.constraints.exclude", "tags": "params.query.tags"}.get(
        member, f"params.constraints.{member}"
    )
    assert (err.code, err.http_status) == ("invalid_params", 400)
    assert err.detail == {"field": field, "index": index}, err.detail
    assert err.message.startswith(f"{field}{where.removeprefix(member)} "), err.message


def test_a_refusal_of_the_whole_array_names_no_index() -> None:
    err = refused(_exclude([GOOD_EXCLUDE] * 101))
    assert err.detail == {"field": "params.constraints.exclude"}
    assert refused(task(params={"query": {"tags": []}})).detail == {"field": "params.query.tags"}
    assert validate_task(_exclude([{"kind": "tag", "id": " x ", "note": 1}])).params["constraints"] == {
        "exclude": [{"kind": "tag", "id": "x"}]
    }
