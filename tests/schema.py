"""Validate API response bodies against the published protocol schema and the upstream one.

:func:`validate` checks a document against ``#/$defs/<Name>`` of the vendored
``protocol.schema.json`` (the same file ``/openapi.json`` is built from);
:func:`validate_upstream` checks the parts the unchanged upstream v1 schema defines
(``upstream-v1.schema.json``: ``Job``, ``Event``, ``Error``, ``Capabilities``; a page or an
envelope by its members) — what a consumer validating against the published schema sees.
:func:`check_response` is an httpx response hook: it finds the operation of the request
in :data:`curaflow.api.openapi.OPERATIONS`, requires the status to be documented there
and validates the body against the documented schema and the upstream one — so every
request a test makes through :meth:`tests.support.Stack.start_api`'s client is checked.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any
from urllib.parse import unquote

import httpx
from jsonschema import Draft202012Validator

from curaflow.api.openapi import OPERATIONS
from curaflow.protocol.schemas import protocol_schema, upstream_schema


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


@cache
def upstream_validator(name: str) -> Draft202012Validator:
    """A validator of ``#/$defs/<name>`` of the upstream v1 schema, as published."""
    schema = upstream_schema()
    return Draft202012Validator({"$defs": schema["$defs"], "$ref": f"#/$defs/{name}"})


#: How a curaflow answer shape is seen through the upstream schema: ``(upstream $defs
#: name, a function giving the parts of the document of that shape)``. Shapes the
#: upstream file predates (pages, envelopes) are checked by their members.
UPSTREAM_PARTS: dict[str, tuple[str, Any]] = {
    "Job": ("Job", lambda doc: [doc]),
    "Event": ("Event", lambda doc: [doc]),
    "Error": ("Error", lambda doc: [doc]),
    "Capabilities": ("Capabilities", lambda doc: [doc]),
    "JobEnvelope": ("Job", lambda doc: [doc["job"]]),
    "JobPage": ("Job", lambda doc: doc["jobs"]),
    "EventPage": ("Event", lambda doc: doc["events"]),
    "ErrorResponse": ("Error", lambda doc: [doc["error"]]),
}


def validate_upstream(document: Any, name: str) -> None:
    """Raise ``AssertionError`` when the parts of ``document`` (a curaflow ``$defs/<name>``
    answer) that the upstream v1 schema defines do not validate against it; shapes it has
    nothing for (``Health``, ``AckResult`` …) pass."""
    if name not in UPSTREAM_PARTS:
        return
    upstream_name, parts = UPSTREAM_PARTS[name]
    for part in parts(document):
        errors = sorted(upstream_validator(upstream_name).iter_errors(part), key=lambda e: list(e.absolute_path))
        if errors:
            lines = [f"  at /{'/'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in errors[:10]]
            raise AssertionError(
                f"{name} does not validate against the upstream $defs/{upstream_name}:\n" + "\n".join(lines)
            )


def validate_one_of(document: Any, names: str | tuple[str, ...]) -> None:
    """:func:`validate` against one name, or against at least one of several."""
    if isinstance(names, str):
        validate(document, names)
        validate_upstream(document, names)
        return
    failures = []
    for name in names:
        try:
            validate(document, name)
            validate_upstream(document, name)
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
    """The ``(method, template)`` of :data:`OPERATIONS` serving ``method path``, or None.

    A path is the address of the most specific template matching it, whatever the method
    (the server's reading, :func:`curaflow.process.http_methods.addressed_routes`): ``GET
    /jobs/x/cancel`` is a method the cancel's address does not take, not the job ``x/cancel``."""
    for _, template, pattern in _ROUTES:
        if pattern.match(path):
            return (method.lower(), template) if (method.lower(), template) in OPERATIONS else None
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
    # Operations are told apart on the raw path split at its literal ``/``: ``/jobs/a%2Fevents``
    # is the job ``a/events``, not the events of ``a``, while ``/jobs/a/%65vents`` is the
    # events of ``a`` (the server reads it so too: curaflow.process.http_methods.segment_path).
    raw_segments = request.url.raw_path.decode("ascii").split("?", 1)[0].split("/")
    route_path = "/".join(unquote(segment).replace("/", "%2F") for segment in raw_segments)
    if path in ("/openapi.json", "/metrics") or path.startswith("/docs") or path.startswith("/redoc"):
        return  # not protocol routes: the OpenAPI document, Prometheus text, the docs UI
    if request.method == "OPTIONS" and response.status_code == 204:
        assert "allow" in response.headers and not response.content, response.headers
        return  # the methods of a path (curaflow.process.http_methods): no body
    method = "GET" if request.method == "HEAD" else request.method  # HEAD is GET without content
    name = expected_schema(method, route_path, response.status_code)
    assert response.headers.get("content-type", "").startswith("application/json"), response.headers
    if request.method == "HEAD":
        assert not response.content, response.content[:100]
        return
    validate_one_of(response.json(), name)
