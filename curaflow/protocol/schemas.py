"""The vendored Workflow Protocol v1 JSON Schema (``curaflow/protocol/schema/protocol.schema.json``).

The file is the upstream v1 schema extended additively by curaflow (page shapes,
response envelopes, the v1.1 target selector in the extension member
``JobTypeDeclaration.extended_features``; see its ``$comment``). The API publishes its
``$defs`` as the components of ``/openapi.json``; tests validate every response body
against ``#/$defs/<Name>`` of it and, where the upstream file defines the shape, of the
unchanged upstream schema (``schema/upstream-v1.schema.json``, :func:`upstream_schema`):
a consumer validating against the published v1 schema accepts every answer.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from importlib import resources
from typing import Any


@lru_cache(maxsize=1)
def _load() -> dict[str, Any]:
    text = (resources.files("curaflow.protocol") / "schema" / "protocol.schema.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@lru_cache(maxsize=1)
def _load_upstream() -> dict[str, Any]:
    text = (resources.files("curaflow.protocol") / "schema" / "upstream-v1.schema.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def upstream_schema() -> dict[str, Any]:
    """A fresh copy of the upstream Workflow Protocol v1 schema, as published (unchanged)."""
    return copy.deepcopy(_load_upstream())


def protocol_schema() -> dict[str, Any]:
    """A fresh copy of the whole schema document (``$defs`` holds the definitions)."""
    return copy.deepcopy(_load())


def definition_names() -> list[str]:
    """Names of every ``$defs`` member, in file order."""
    return list(_load()["$defs"])


def rewrite_refs(node: Any, prefix: str) -> Any:
    """Copy ``node`` with every ``#/$defs/X`` reference rewritten to ``<prefix>X``.

    Args:
        node: a schema fragment (dicts, lists, scalars).
        prefix: e.g. ``#/components/schemas/`` for OpenAPI.
    """
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/"):
                out[key] = prefix + value[len("#/$defs/") :]
            else:
                out[key] = rewrite_refs(value, prefix)
        return out
    if isinstance(node, list):
        return [rewrite_refs(v, prefix) for v in node]
    return node
