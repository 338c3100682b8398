"""The Task: the consumer's ``POST /jobs`` body (``$defs/Task``) and its ``candidate_search``
params, each member checked by its rule (:mod:`curaflow.protocol.models.rules`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, StrictBool, ValidationInfo, field_validator

from curaflow.protocol.models.base import RequestShape
from curaflow.protocol.models.rules import (
    MAX_SCAN_LIMIT,
    check_account,
    check_callback_url,
    check_correlation_id,
    check_deadline_ms,
    check_exclude,
    check_exclude_id,
    check_exclude_item,
    check_exclude_kind,
    check_idempotency_key,
    check_job_type,
    check_labels,
    check_params,
    check_positive,
    check_protocol_version,
    check_tag,
    check_tags,
    check_target_id,
    check_work_type,
    check_work_types,
    refuse,
)


class TaskExclude(RequestShape):
    """One ``params.constraints.exclude`` item."""

    kind: Annotated[Literal["work", "candidate", "tag"], BeforeValidator(check_exclude_kind)]
    id: Annotated[str, BeforeValidator(check_exclude_id)]


class TaskQuery(RequestShape):
    """``params.query``: 1–20 non-blank tags of at most 100 characters (trimmed)."""

    tags: Annotated[list[Annotated[str, BeforeValidator(check_tag)]], BeforeValidator(check_tags)]
    expand: StrictBool | None = None


class TaskConstraints(RequestShape):
    """``params.constraints``; ``scan_limit`` above 100 is taken as 100."""

    exclude: Annotated[
        list[Annotated[TaskExclude, BeforeValidator(check_exclude_item)]] | None, BeforeValidator(check_exclude)
    ] = None
    limit: Annotated[int | None, BeforeValidator(check_positive("params.constraints.limit"))] = None
    scan_limit: Annotated[
        int | None,
        BeforeValidator(check_positive("params.constraints.scan_limit")),
        AfterValidator(lambda v: None if v is None else min(v, MAX_SCAN_LIMIT)),
    ] = None
    work_types: Annotated[
        list[Annotated[str, BeforeValidator(check_work_type)]] | None, BeforeValidator(check_work_types)
    ] = None


class TaskSource(RequestShape):
    """``params.source``."""

    platform: Literal["pixiv"] | None = None
    account: Annotated[str | None, BeforeValidator(check_account)] = None


class CandidateSearchParams(RequestShape):
    """``$defs/CandidateSearchParams`` plus the v1.1 ``target_id`` selector.

    ``query`` is required unless ``target_id`` names the target to run as configured.
    """

    target_id: Annotated[str | None, BeforeValidator(check_target_id)] = None
    source: TaskSource | None = None
    query: TaskQuery | None = Field(default=None, validate_default=True)
    constraints: TaskConstraints | None = None

    @field_validator("query")
    @classmethod
    def _query_or_target(cls, query: TaskQuery | None, info: ValidationInfo) -> TaskQuery | None:
        if query is None and info.data.get("target_id") is None:
            raise refuse("params.query", "params.query is required")
        return query

    def retrieval_view(self) -> dict[str, Any]:
        """The normalised params ("retrieval view") an idempotency replay is compared on.

        Rebuilt in the fixed key order ``source, query{tags, expand?},
        constraints{exclude?, limit?, scan_limit?, work_types?}`` with absent members and
        unknown fields dropped; ``target_id`` is not part of it.
        """
        view: dict[str, Any] = {}
        if self.source is not None:
            source: dict[str, Any] = {}
            if self.source.platform is not None:
                source["platform"] = self.source.platform
            if self.source.account is not None:
                source["account"] = self.source.account
            view["source"] = source
        if self.query is not None:
            query: dict[str, Any] = {"tags": list(self.query.tags)}
            if self.query.expand is True:
                query["expand"] = True
            view["query"] = query
        if self.constraints is not None:
            c = self.constraints
            constraints: dict[str, Any] = {}
            if c.exclude is not None:
                constraints["exclude"] = [{"kind": item.kind, "id": item.id} for item in c.exclude]
            if c.limit is not None:
                constraints["limit"] = c.limit
            if c.scan_limit is not None:
                constraints["scan_limit"] = c.scan_limit
            if c.work_types is not None:
                constraints["work_types"] = list(c.work_types)
            view["constraints"] = constraints
        return view


class Task(RequestShape):
    """``$defs/Task``: the consumer's request (``POST /jobs`` body), with the admission rules.

    Validating a body against this model is the API's request validation (the rules:
    :mod:`curaflow.protocol.models.rules`); :func:`curaflow.protocol.task.validate_task` turns the first
    error into the protocol's answer. Unknown fields are ignored at every level.
    """

    protocol_version: Annotated[str, BeforeValidator(check_protocol_version)]
    job_type: Annotated[str, BeforeValidator(check_job_type)]
    idempotency_key: Annotated[str, BeforeValidator(check_idempotency_key)]
    correlation_id: Annotated[str | None, BeforeValidator(check_correlation_id)] = None
    callback_url: Annotated[str | None, BeforeValidator(check_callback_url)] = None
    deadline_ms: Annotated[int | None, BeforeValidator(check_deadline_ms)] = None
    labels: Annotated[dict[str, str] | None, BeforeValidator(check_labels)] = None
    params: Annotated[CandidateSearchParams, BeforeValidator(check_params)]
