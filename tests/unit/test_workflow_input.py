"""A workflow's one untyped start argument: the shared reader and each workflow's wording (pure).

:func:`curaflow.domain.workflow_input.read_one_input` is the one reading of
``EventPushWorkflow``'s and ``ScheduledJobWorkflow``'s ``*args``; each words its refusals,
and those texts are the runs' failure messages, so they are pinned here word for word.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, model_validator
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue

from curaflow.domain.messages import PushInput, read_push_input
from curaflow.domain.occurrence import OccurrenceInput, read_occurrence_input
from curaflow.domain.workflow_input import InputRefusals, read_one_input

UNDECODABLE = RawValue(Payload(metadata={"encoding": b"binary/plain"}, data=b"x"))


class Inner(BaseModel):
    n: int


class Sample(BaseModel):
    name: str
    inner: Inner | None = None
    a: int = 0
    b: int = 0
    c: int = 0
    d: int = 0
    e: int = 0

    @model_validator(mode="after")
    def _not_forbidden(self) -> Sample:
        if self.name == "forbidden":
            raise ValueError("forbidden name")
        return self


#: Refusals that say which branch answered and with what.
TAGGED = InputRefusals(
    arguments=lambda count: f"arguments:{count}",
    not_an_object=lambda kind: f"not_an_object:{kind}",
    invalid_object=lambda fields: f"invalid_object:{fields}",
)


def test_one_object_the_model_validates_is_the_model_and_the_model_itself_is_kept() -> None:
    assert read_one_input([{"name": "x", "inner": {"n": 2}, "other": 1}], Sample, TAGGED) == Sample(
        name="x", inner=Inner(n=2)
    )
    model = Sample(name="x")
    assert read_one_input([model], Sample, TAGGED) is model
    assert read_one_input((model,), Sample, TAGGED) is model  # any sequence


@pytest.mark.parametrize(
    ("args", "answer"),
    [
        ([], "arguments:0"),
        ([{"name": "x"}, {"name": "x"}], "arguments:2"),
        (["x"], "not_an_object:a JSON string"),
        ([None], "not_an_object:a JSON null"),
        ([True], "not_an_object:a JSON boolean"),
        ([1.5], "not_an_object:a JSON number"),
        ([[{"name": "x"}]], "not_an_object:a JSON array"),
        ([UNDECODABLE], "not_an_object:a payload that is not JSON"),
        ([Inner(n=1)], "not_an_object:a JSON Inner"),  # another model is no object
        ([{}], "invalid_object:name"),
        ([{"name": "x", "inner": {"n": "two"}}], "invalid_object:inner.n"),
        ([{"name": "forbidden"}], "invalid_object:input"),  # the object itself
        # sorted, each field once, the first five
        ([{"name": 1, "e": "x", "d": "x", "c": "x", "b": "x", "a": "x"}], "invalid_object:a, b, c, d, e"),
    ],
)
def test_anything_else_is_refused_in_the_workflows_words(args: list[Any], answer: str) -> None:
    assert read_one_input(args, Sample, TAGGED) == answer


PUSH = "EventPushWorkflow takes one PushInput {job_id, policy} (curaflow's push sweeper starts it)"
FIX = "run `curaflow schedules sync` to restore the plan's action"
PLAN = {"schedule_id": "nightly", "cron": ["0 3 * * *"], "task_queue": "q"}


@pytest.mark.parametrize(
    ("args", "push", "occurrence"),
    [
        ([], f"{PUSH}; got 0 arguments", f"the schedule's action passed 0 arguments, not one plan; {FIX}"),
        (
            [UNDECODABLE],
            f"{PUSH}; got a payload that is not JSON",
            f"the schedule's action passed a payload that is not JSON, not a plan object; {FIX}",
        ),
        (
            ["junk"],
            f"{PUSH}; got a JSON string",
            f"the schedule's action passed a JSON string, not a plan object; {FIX}",
        ),
        (
            [{"job_id": 3, "schedule_id": 3}],
            f"{PUSH}; got an object that is none (fields: job_id)",
            f"the schedule's action passed an object that is no plan (fields: cron, schedule_id, task_queue); {FIX}",
        ),
    ],
)
def test_each_workflow_keeps_its_wording(args: list[Any], push: str, occurrence: str) -> None:
    """The texts the runs fail with (``invalid_push_input`` / ``invalid_occurrence_input``)."""
    assert read_push_input(args) == push
    assert read_occurrence_input(args) == occurrence


def test_each_workflow_reads_its_own_model() -> None:
    assert read_push_input([{"job_id": "j"}]) == PushInput(job_id="j")
    assert read_occurrence_input([PLAN]) == OccurrenceInput.model_validate(PLAN)
