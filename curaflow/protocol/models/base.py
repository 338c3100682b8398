"""The two kinds of wire shape: an answer keeps unknown fields, a request ignores them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class AnswerShape(BaseModel):
    """An answer shape: unknown fields are kept (the protocol is additive-only)."""

    model_config = ConfigDict(extra="allow")


class RequestShape(BaseModel):
    """A request shape: unknown fields are ignored at every level (never stored, never echoed)."""

    model_config = ConfigDict(extra="ignore")
