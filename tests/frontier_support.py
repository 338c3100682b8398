"""Scans as a target's job runs them, for the scan frontier's tests (no I/O of their own)."""

from __future__ import annotations

from typing import Any

from curaflow.domain.messages import TargetSpec
from curaflow.sources.pixiv.client import PixivClient
from curaflow.sources.pixiv.scan import KnownHook, ScanCheckpoint, scan


async def _nothing(cp: ScanCheckpoint) -> None:
    return None


async def scan_for_one(
    client: PixivClient, target: TargetSpec, known: KnownHook, *, on_page: Any = _nothing, **extra: Any
) -> ScanCheckpoint:
    """One scan for one candidate (``scan_limit`` 1), every bookmark count settled
    (``settled_before`` far ahead), checkpoints dropped unless ``on_page`` keeps them;
    ``extra``: the rest of :func:`~curaflow.sources.pixiv.scan.scan`'s keywords
    (``frontier``, ``max_examined``, ``unavailable``, ``checkpoint`` …)."""
    return await scan(client, target, scan_limit=1, known=known, on_page=on_page, settled_before="2100-01-01", **extra)
