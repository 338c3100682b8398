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
from curaflow.temporal.connection import DATA_CONVERTER

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
    no_one_meaning=lambda why: f"no_one_meaning:{why}",
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


def decoded(text: bytes) -> Any:
    """``text`` as the worker's payload converter decodes an untyped ``json/plain`` argument."""
    [value] = DATA_CONVERTER.payload_converter.from_payloads([Payload(metadata={"encoding": b"json/plain"}, data=text)])
    return value


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (b'{"name":"a","name":"b"}', "request body has the member 'name' more than once in one object"),
        (b'{"name":"a","other":NaN}', "request body holds NaN, which is not a JSON number"),
        (b'{"name":"a","inner":{"n":1e400}}', "request body holds the number 1e400, out of range"),
    ],
)
def test_an_object_whose_text_has_no_one_meaning_is_refused_unless_the_workflow_reads_it_as_before(
    text: bytes, why: str
) -> None:
    """The job workflow's rule (``one-meaning-input``), by the same decode: refused naming
    ``POST /jobs``'s refusal; a run started before its workflow's patch (``one_meaning``
    False) reads it as before (the last of a member given twice)."""
    asked: list[bool] = []

    def before_the_patch() -> bool:
        asked.append(False)
        return False

    assert read_one_input([decoded(text)], Sample, TAGGED) == f"no_one_meaning:{why}"
    lenient = read_one_input([decoded(text)], Sample, TAGGED, one_meaning=before_the_patch)
    assert asked == [False]
    if b"1e400" in text:
        assert lenient == "invalid_object:inner.n"  # inf is no int
    else:
        assert lenient == Sample(name="b" if b'"name":"b"' in text else "a")


def test_the_patch_is_asked_only_for_a_text_with_no_one_meaning() -> None:
    asked: list[bool] = []

    def patched() -> bool:
        asked.append(True)
        return True

    for args in ([decoded(b'{"name":"a"}')], [decoded(b'[{"a":1,"a":2}]')], [], [UNDECODABLE], [{}]):
        read_one_input(args, Sample, TAGGED, one_meaning=patched)
    assert asked == []


def test_each_workflow_words_a_text_with_no_one_meaning() -> None:
    """The texts the runs fail with; a well-formed twin is read."""
    twice = "request body has the member 'job_id' more than once in one object"
    assert read_push_input([decoded(b'{"job_id":"a","job_id":"b"}')]) == (
        f"{PUSH}; got a JSON text with no one meaning: {twice}"
    )
    assert read_push_input([decoded(b'{"job_id":"a","job_id":"b"}')], one_meaning=lambda: False) == PushInput(
        job_id="b"
    )
    twice = "request body has the member 'schedule_id' more than once in one object"
    text = b'{"schedule_id":"a","schedule_id":"nightly","cron":["0 3 * * *"],"task_queue":"q"}'
    assert read_occurrence_input([decoded(text)]) == (
        f"the schedule's action passed a JSON text with no one meaning ({twice}); {FIX}"
    )
    assert read_occurrence_input([decoded(text)], one_meaning=lambda: False) == OccurrenceInput.model_validate(PLAN)


@pytest.mark.parametrize(
    ("text", "read"),
    [
        (b'{"schedule_id":"nightly","cron":["0 3 * * *"],"task_queue":"q"}', True),
        (b'{"schedule_id":"x","schedule_id":"nightly","cron":["0 3 * * *"],"task_queue":"q"}', False),
        (b'{"schedule_id":"nightly","cron":["0 3 * * *"],"task_queue":"q","jitter":1e400}', False),
    ],
)
async def test_sync_and_the_watch_read_a_schedules_action_as_its_trampoline_does(text: bytes, read: bool) -> None:
    """An action whose text has no one meaning fails every occurrence; ``sync`` and the watch
    (``curaflow.schedules.sync.current_input``) read it as no plan — the watch says
    ``action_not_a_plan``, ``sync`` restores it — instead of its last reading, which equals
    the configured plan: ``unchanged``, every occurrence failing in silence."""
    from types import SimpleNamespace

    from temporalio.api.common.v1 import Payloads
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflow.v1 import NewWorkflowExecutionInfo
    from temporalio.client import ScheduleActionStartWorkflow

    from curaflow.schedules.sync import current_input
    from curaflow.temporal.connection import DATA_CONVERTER

    action = ScheduleActionStartWorkflow(
        "ScheduledJobWorkflow",
        raw_info=NewWorkflowExecutionInfo(
            workflow_id="nightly@occurrence",
            workflow_type={"name": "ScheduledJobWorkflow"},
            task_queue=TaskQueue(name="q"),
            input=Payloads(payloads=[Payload(metadata={"encoding": b"json/plain"}, data=text)]),
        ),
    )
    desc = SimpleNamespace(schedule=SimpleNamespace(action=action))
    client = SimpleNamespace(data_converter=DATA_CONVERTER)
    found = await current_input(client, desc)  # type: ignore[arg-type]
    assert found == (OccurrenceInput.model_validate(PLAN) if read else None)


@pytest.mark.parametrize(
    "extra",
    [b'{"schedule_id":"nightly","cron":["0 3 * * *"],"task_queue":"q"}', b'"extra"', b"null"],
)
async def test_a_schedules_action_of_more_than_one_argument_is_no_plan_for_sync_and_the_watch(extra: bytes) -> None:
    """A hand edit that leaves the plan first and adds an argument after it fails every
    occurrence (the trampoline takes exactly one argument: "passed 2 arguments"); ``sync``
    and the watch (``current_input``) read the action as the trampoline does — all its
    arguments —, so it is no plan there either (the watch says ``action_not_a_plan``,
    ``sync`` restores it), never the first argument's reading, ``unchanged``."""
    from types import SimpleNamespace

    from temporalio.api.common.v1 import Payloads
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflow.v1 import NewWorkflowExecutionInfo
    from temporalio.client import ScheduleActionStartWorkflow

    from curaflow.schedules.sync import current_input

    plan = b'{"schedule_id":"nightly","cron":["0 3 * * *"],"task_queue":"q"}'
    payloads = [Payload(metadata={"encoding": b"json/plain"}, data=data) for data in (plan, extra)]
    action = ScheduleActionStartWorkflow(
        "ScheduledJobWorkflow",
        raw_info=NewWorkflowExecutionInfo(
            workflow_id="nightly@occurrence",
            workflow_type={"name": "ScheduledJobWorkflow"},
            task_queue=TaskQueue(name="q"),
            input=Payloads(payloads=payloads),
        ),
    )
    trampoline_reads = read_occurrence_input(await DATA_CONVERTER.decode(payloads))
    assert trampoline_reads == f"the schedule's action passed 2 arguments, not one plan; {FIX}"
    desc = SimpleNamespace(schedule=SimpleNamespace(action=action))
    client = SimpleNamespace(data_converter=DATA_CONVERTER)
    assert await current_input(client, desc) is None  # type: ignore[arg-type]
