"""Validate API response bodies against the published protocol schema.

:func:`validate` checks a document against ``#/$defs/<Name>`` of the vendored
``protocol.schema.json`` (the same file ``/openapi.json`` is built from).
:func:`check_response` is an httpx response hook: it finds the operation of the request
in :data:`curaflow.api.openapi.OPERATIONS`, requires the status to be documented there
and validates the body against the documented schema — so every request a test makes
through :meth:`tests.support.Stack.start_api`'s client is checked.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import httpx
from jsonschema import Draft202012Validator

from curaflow.api.openapi import OPERATIONS
from curaflow.protocol.schemas import protocol_schema


@cache
def validator(name: str) -> Draft202012Validator:
    """A validator of ``#/$defs/<name>`` (format checks off, like the protocol)."""
    schema = protocol_schema()
    if name not in schema["$defs"]:
        raise KeyError(f"no $defs/{name} in the protocol schema")
    return Draft202012Validator({"$defs": schema["$defs"], "$ref": f"#/$defs/{name}"})


def validate(document: Any, name: str) -> None:
    """Raise ``AssertionError`` listing every violation of ``#/$defs/<name>`` by ``document``."""
    errors = sorted(validator(name).iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"  at /{'/'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in errors[:10]]
        raise AssertionError(f"body does not validate against $defs/{name}:\n" + "\n".join(lines))


def validate_one_of(document: Any, names: str | tuple[str, ...]) -> None:
    """:func:`validate` against one name, or against at least one of several."""
    if isinstance(names, str):
        validate(document, names)
        return
    failures = []
    for name in names:
        try:
            validate(document, name)
            return
        except AssertionError as err:
            failures.append(str(err))
    raise AssertionError("\n".join(failures))


def _template(path: str) -> str:
    return "^" + re.sub(r"\{[^}]+\}", "(.+)", path) + "$"


# Most specific templates first (``/jobs/{job_id}`` also matches ``/jobs/x/events``).
_ROUTES = sorted(
    ((method, path, re.compile(_template(path))) for method, path in OPERATIONS),
    key=lambda item: (-item[1].count("/"), -len(item[1])),
)


def operation_of(method: str, path: str) -> tuple[str, str] | None:
    """The ``(method, template)`` of :data:`OPERATIONS` serving ``method path``, or None."""
    for op_method, template, pattern in _ROUTES:
        if op_method == method.lower() and pattern.match(path):
            return op_method, template
    return None


def expected_schema(method: str, path: str, status: int) -> str | tuple[str, ...]:
    """The ``$defs`` name documented for this answer.

    Raises:
        AssertionError: the route or the status is not documented.
    """
    op = operation_of(method, path)
    if op is None:
        if status in (404, 405):
            return "ErrorResponse"  # unknown path / method: still a protocol error
        raise AssertionError(f"{method} {path} is not an operation of the API")
    responses = OPERATIONS[op].responses
    if status not in responses:
        raise AssertionError(f"{method} {path} answered {status}, not documented (documented: {sorted(responses)})")
    return responses[status]


async def check_response(response: httpx.Response) -> None:
    """httpx response hook: the answer must be documented and its body must validate."""
    await response.aread()
    request = response.request
    path = request.url.path  # percent-decoded
    # Operations are told apart on the raw path: ``/jobs/a%2Fevents`` is the job
    # ``a/events``, not the events of ``a`` (the server checks the raw path too).
    route_path = request.url.raw_path.decode("ascii").split("?", 1)[0]
    if path in ("/openapi.json", "/metrics") or path.startswith("/docs") or path.startswith("/redoc"):
        return  # not protocol routes: the OpenAPI document, Prometheus text, the docs UI
    name = expected_schema(request.method, route_path, response.status_code)
    assert response.headers.get("content-type", "").startswith("application/json"), response.headers
    validate_one_of(response.json(), name)
