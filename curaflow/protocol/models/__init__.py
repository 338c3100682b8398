"""Pydantic models of the Workflow Protocol v1 wire shapes, imported from here.

Each is defined in the module of its part of the protocol: jobs, events, meta (the
producer itself), tasks (the request) and rules (the Task's admission rules).

They mirror ``$defs`` of ``curaflow/protocol/schema/protocol.schema.json`` (``Job``,
``Event``, ``Error``, ``Capabilities`` …, and the page shapes of reference §4 —
``JobPage``, ``EventPage``, ``AckResult`` — that curaflow added to the vendored file).
The API publishes the schema file itself in ``/openapi.json``; :mod:`curaflow.client`
parses responses into these models. Unknown fields are kept (``extra="allow"``): the protocol is additive-only.
Times are epoch milliseconds (UTC).
"""

from __future__ import annotations

from curaflow.protocol.models.base import AnswerShape, RequestShape
from curaflow.protocol.models.events import (
    TERMINAL_EVENT_TYPES,
    AckRequest,
    AckResult,
    Event,
    EventPage,
    EventPayload,
)
from curaflow.protocol.models.jobs import (
    Asset,
    Candidate,
    Error,
    ErrorResponse,
    FilteredWork,
    Job,
    JobEnvelope,
    JobPage,
    Locator,
    MatchedTag,
    Progress,
    ResultCandidateSearch,
)
from curaflow.protocol.models.meta import Capabilities, Health, JobTypeDeclaration, Readiness, ReadinessCheck
from curaflow.protocol.models.rules import (
    EXCLUDE_KINDS,
    ITEM_RULES,
    MAX_ACCOUNT_LENGTH,
    MAX_CALLBACK_LENGTH,
    MAX_CORRELATION_LENGTH,
    MAX_DEADLINE_MS,
    MAX_EXCLUDE,
    MAX_EXCLUDE_ID_LENGTH,
    MAX_SCAN_LIMIT,
    MAX_TAG_LENGTH,
    MAX_TAGS,
    MIN_DEADLINE_MS,
    RULES,
)
from curaflow.protocol.models.tasks import (
    CandidateSearchParams,
    Task,
    TaskConstraints,
    TaskExclude,
    TaskQuery,
    TaskSource,
)

__all__ = [
    "EXCLUDE_KINDS",
    "ITEM_RULES",
    "MAX_ACCOUNT_LENGTH",
    "MAX_CALLBACK_LENGTH",
    "MAX_CORRELATION_LENGTH",
    "MAX_DEADLINE_MS",
    "MAX_EXCLUDE",
    "MAX_EXCLUDE_ID_LENGTH",
    "MAX_SCAN_LIMIT",
    "MAX_TAGS",
    "MAX_TAG_LENGTH",
    "MIN_DEADLINE_MS",
    "RULES",
    "TERMINAL_EVENT_TYPES",
    "AckRequest",
    "AckResult",
    "AnswerShape",
    "Asset",
    "Candidate",
    "CandidateSearchParams",
    "Capabilities",
    "Error",
    "ErrorResponse",
    "Event",
    "EventPage",
    "EventPayload",
    "FilteredWork",
    "Health",
    "Job",
    "JobEnvelope",
    "JobPage",
    "JobTypeDeclaration",
    "Locator",
    "MatchedTag",
    "Progress",
    "Readiness",
    "ReadinessCheck",
    "RequestShape",
    "ResultCandidateSearch",
    "Task",
    "TaskConstraints",
    "TaskExclude",
    "TaskQuery",
    "TaskSource",
]
