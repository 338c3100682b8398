"""Untyped workflow input that does not decode is kept raw; a bug while decoding is raised.

:class:`curaflow.temporal.connection.InputPayloadConverter` decodes the positions of a
handler without type hints (``JobWorkflow``'s and the schedule trampoline's ``*args``).
A payload a foreign client sent that no converter of the worker reads stays a
``RawValue``, which the workflow refuses (``invalid_params``, DESIGN.md decision 14).
Anything else raised while decoding is a bug of curaflow or the SDK: it must fail the
workflow task (retried until fixed), not be taken for the client's input and refused
(docs/temporal.md "Only expected failures become outcomes").
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue

from curaflow.temporal.connection import InputPayloadConverter


def payload(encoding: bytes, data: bytes) -> Payload:
    return Payload(metadata={"encoding": encoding}, data=data)


@pytest.mark.parametrize(
    "foreign",
    [
        payload(b"text/x-unknown", b"hello"),  # an encoding nobody here reads
        payload(b"json/plain", b"{not json"),  # JSON that does not parse
        payload(b"binary/null", b"data"),  # a null that carries data
        payload(b"json/protobuf", b"{}"),  # a protobuf message no type of which is named
    ],
    ids=["unknown-encoding", "bad-json", "null-with-data", "protobuf-unnamed"],
)
def test_a_payload_no_converter_reads_stays_raw(foreign: Payload) -> None:
    [value] = InputPayloadConverter().from_payloads([foreign])
    assert isinstance(value, RawValue) and value.payload == foreign


def test_json_decodes_untyped() -> None:
    # Guard: what every client sends decodes as before.
    assert InputPayloadConverter().from_payloads([payload(b"json/plain", b'{"a": [1]}')]) == [{"a": [1]}]


@pytest.mark.parametrize("bug", [TypeError, AttributeError, KeyError])
def test_a_bug_while_decoding_untyped_input_is_raised_not_kept_raw(bug: type[Exception]) -> None:
    # Before, every exception made the input a RawValue: a bug of the worker's JSON
    # decoding refused each Task started by a Temporal client as "request body must be a
    # JSON object" — a business outcome (the execution failed invalid_params) for a bug.
    converter = InputPayloadConverter()

    def broken(payload: Payload, type_hint: Any = None) -> Any:
        raise bug("a bug while decoding")

    converter.converters[b"json/plain"].from_payload = broken  # type: ignore[method-assign]
    with pytest.raises(bug):
        converter.from_payloads([payload(b"json/plain", b"{}")])


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (b'{"a": 1, "a": 2}', "duplicate_member"),
        (b'{"a": {"b": NaN}}', "not_json_number"),
        (b'{"a": 1e400}', "number_out_of_range"),
    ],
)
def test_an_untyped_object_whose_text_has_no_one_meaning_carries_post_jobs_refusal(text: bytes, reason: str) -> None:
    # The pydantic reading of these texts is one of several (the last member, nan, inf):
    # it was handed on as the client's object, and a Task POST /jobs refuses was admitted.
    from curaflow.protocol.json_text import AmbiguousObject, ambiguity

    [value] = InputPayloadConverter().from_payloads([payload(b"json/plain", text)])
    assert isinstance(value, AmbiguousObject) and isinstance(value, dict)
    refused = ambiguity(value)
    assert refused is not None and refused.code == "invalid_params" and refused.detail["reason"] == reason
    # A typed position reads as the pydantic converter always did (curaflow's own payloads).
    [typed] = InputPayloadConverter().from_payloads([payload(b"json/plain", text)], [dict])
    assert type(typed) is dict


def test_an_untyped_object_with_one_meaning_is_a_plain_dict() -> None:
    [value] = InputPayloadConverter().from_payloads([payload(b"json/plain", b'{"a": [1, 2.5, "\\u00e9"]}')])
    assert type(value) is dict and value == {"a": [1, 2.5, "é"]}


class _OwnModule(BaseModel):
    """A type of a module outside curaflow (as a workflow's own module is, which the sandbox
    re-imports for every run)."""

    n: int


def _adapters_built(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The type hints of every ``TypeAdapter`` built from now on."""
    built: list[object] = []
    init = TypeAdapter.__init__

    def counted(self: TypeAdapter[Any], type_: Any, *args: Any, **kwargs: Any) -> None:
        built.append(type_)
        init(self, type_, *args, **kwargs)

    monkeypatch.setattr(TypeAdapter, "__init__", counted)
    return built


def test_a_new_converter_builds_no_adapter_for_an_untyped_input_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK builds a payload converter for every workflow run and activation. Each read a
    # job's untyped input (JobWorkflow's *args) with a TypeAdapter(Any) of its own: ~0.19 ms
    # of the worker's CPU a job until 2026-12-07. Now hints that are one object for the whole
    # process share the process's adapters; a hint of another module keeps the converter's own.
    from curaflow.domain.messages import CellUpdate

    built = _adapters_built(monkeypatch)
    data = payload(b"json/plain", b'{"job_id": "j1"}')
    for _ in range(3):
        converter = InputPayloadConverter()
        assert converter.from_payloads([data]) == [{"job_id": "j1"}]
        converter.from_payloads([payload(b"json/plain", b'{"n": 1}')], [_OwnModule])
        converter.from_payloads([payload(b"json/plain", b"null")], [CellUpdate | None])  # unhashable-safe union
    assert built.count(Any) <= 1
    assert built.count(_OwnModule) == 3  # each converter's own, as the SDK does


def test_a_union_of_the_process_types_shares_one_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    # The finish step's result is read as ``JobState | FinishedElsewhere`` (2026-12-07): a
    # union is no ``type``, so every run's converter built its adapter again (~0.25 ms a job).
    # A union whose members are all one object for the whole process is one too.
    from curaflow.domain.messages import FinishedElsewhere, JobState

    built = _adapters_built(monkeypatch)
    state = payload(b"json/plain", b'{"job_id": "j1"}')
    for _ in range(3):
        [value] = InputPayloadConverter().from_payloads([state], [JobState | FinishedElsewhere])
        assert type(value) is JobState and value.job_id == "j1"
        [own] = InputPayloadConverter().from_payloads([payload(b"json/plain", b'{"n": 1}')], [_OwnModule | None])
        assert own == _OwnModule(n=1)
    assert built.count(JobState | FinishedElsewhere) <= 1
    assert built.count(_OwnModule | None) == 3  # a union holding a workflow module's type stays each converter's
