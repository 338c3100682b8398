"""What a ``JobWorkflow`` start input is (``workflows.submission``) and how the worker's
converter hands an undecodable untyped payload over (``curaflow.temporal.connection``)."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue

from curaflow.domain.messages import JobInput
from curaflow.temporal.connection import DATA_CONVERTER
from workflows.submission import NOT_AN_OBJECT, read_submission

TASK = {"protocol_version": "1", "idempotency_key": "k", "params": {"target_id": "demo"}}
JOB_INPUT = {"job_id": "demo@manual-k", "plan_id": "demo", "created_at_ms": 1, "deadline_at_ms": 2, "targets": []}


@pytest.mark.parametrize(
    ("args", "detail"),
    [
        ([], {"arguments": 0}),
        ([TASK, TASK], {"arguments": 2}),
        (["a string"], {"received": "string"}),
        ([42], {"received": "number"}),
        ([[TASK]], {"received": "array"}),
        ([None], {"received": "null"}),
        ([RawValue(Payload(metadata={"encoding": b"x/unknown"}, data=b"?"))], {"encoding": "x/unknown"}),
    ],
)
def test_anything_but_one_json_object_is_refused_as_http_refuses_a_non_object_body(
    args: list[Any], detail: dict[str, Any]
) -> None:
    refusal = read_submission(args).refusal
    assert refusal is not None and refusal.code == "invalid_params" and refusal.message == NOT_AN_OBJECT
    assert refusal.detail == {"reason": "workflow_input", **detail}


def test_a_task_is_admitted_even_when_it_also_validates_as_a_job_input() -> None:
    assert read_submission([TASK]).task == TASK
    mixed = read_submission([{**JOB_INPUT, **TASK}])
    assert mixed.task is not None and mixed.mixed
    assert read_submission([{"anything": 1}]).task == {"anything": 1}  # admission says what is wrong


def test_a_job_input_without_task_members_is_an_admitted_job() -> None:
    submission = read_submission([JOB_INPUT])
    assert submission.task is None and submission.job_input == JobInput.model_validate(JOB_INPUT)


def test_the_converter_keeps_undecodable_untyped_payloads_raw_and_decodes_typed_ones_as_before() -> None:
    converter = DATA_CONVERTER.payload_converter
    unknown = Payload(metadata={"encoding": b"x/unknown"}, data=b"?")
    [good] = converter.to_payloads([JOB_INPUT])
    values = converter.from_payloads([good, unknown])
    assert values[0] == JOB_INPUT and isinstance(values[1], RawValue) and values[1].payload == unknown
    with pytest.raises(KeyError):
        converter.from_payloads([unknown], [JobInput])
