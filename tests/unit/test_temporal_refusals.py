"""Whether a pass's refusals are each execution's or Temporal's (``curaflow.temporal.answers.Refusals``):
a refusal among answers is its execution's alone; every request of a pass refused, at least two
executions and none answered, is an outage (a proxy answering ``INTERNAL`` to every describe)."""

from __future__ import annotations

from google.protobuf.any_pb2 import Any as AnyDetail
from temporalio.api.common.v1 import GrpcStatus
from temporalio.api.errordetails.v1 import NotFoundFailure
from temporalio.service import RPCError, RPCStatusCode

from curaflow.temporal.answers import EveryRequestRefused, Refusals, temporal_outage


def refusal(status: RPCStatusCode = RPCStatusCode.INTERNAL) -> RPCError:
    return RPCError("upstream connect error", status, GrpcStatus(code=int(status)).SerializeToString())


def not_found() -> RPCError:
    detail = AnyDetail()
    detail.Pack(NotFoundFailure())
    raw = GrpcStatus(code=int(RPCStatusCode.NOT_FOUND), message="workflow not found", details=[detail])
    return RPCError("workflow not found", RPCStatusCode.NOT_FOUND, raw.SerializeToString())


def test_every_request_refused_about_two_executions_is_an_outage_naming_the_statuses() -> None:
    tally = Refusals()
    assert tally.refused("a", refusal()) and tally.refused("b", refusal(RPCStatusCode.UNKNOWN))
    outage = tally.outage()
    assert isinstance(outage, EveryRequestRefused) and temporal_outage(outage)
    assert outage.refused == {"a": "INTERNAL", "b": "UNKNOWN"}
    assert "INTERNAL, UNKNOWN" in str(outage)


def test_a_refusal_among_answers_or_of_one_execution_alone_is_that_executions() -> None:
    among = Refusals()
    among.answered()
    assert among.refused("a", refusal()) and among.refused("b", refusal())
    assert among.outage() is None
    alone = Refusals()
    assert alone.refused("a", refusal()) and alone.refused("a", refusal(RPCStatusCode.FAILED_PRECONDITION))
    assert alone.outage() is None  # one execution asked twice (two rules) is still one
    assert Refusals().outage() is None  # nothing asked


def test_temporals_own_not_found_is_an_answer_and_an_outage_status_is_no_refusal() -> None:
    tally = Refusals()
    assert tally.refused("gone", not_found())  # a run deleted between a list and a read: said so
    assert tally.refused("a", refusal()) and tally.refused("b", refusal())
    assert tally.outage() is None
    other = Refusals()
    for status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.UNAUTHENTICATED):
        assert not other.refused("a", refusal(status))  # the caller raises it as it is
    assert other.outage() is None
