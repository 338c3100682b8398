"""Deterministic splitting of a work's pages into the parts one route request can carry."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def balanced_chunks(items: Sequence[T], max_size: int) -> list[list[T]]:
    """Split ``items`` into ``ceil(n / max_size)`` consecutive chunks of near-equal size.

    Sizes differ by at most one, larger chunks first: 11 pages at 10 per album become
    6 + 5 (never 10 + 1, which Telegram would refuse as an album of one). The split
    depends only on ``len(items)`` and ``max_size``, so a resumed delivery finds the
    same chunks and continues at the first unconfirmed one.
    """
    n = len(items)
    if n == 0:
        return []
    count = math.ceil(n / max_size)
    base, extra = divmod(n, count)
    chunks: list[list[T]] = []
    start = 0
    for i in range(count):
        size = base + (1 if i < extra else 0)
        chunks.append(list(items[start : start + size]))
        start += size
    return chunks


def packed_chunks(sizes: Sequence[int], max_items: int, max_bytes: int) -> list[list[int]]:
    """Greedy, in order: indexes of ``sizes`` grouped so each group has at most
    ``max_items`` entries and ``max_bytes`` in total (an entry alone over ``max_bytes``
    gets a group of its own; callers reject it first).
    """
    groups: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i, size in enumerate(sizes):
        if current and (len(current) >= max_items or total + size > max_bytes):
            groups.append(current)
            current, total = [], 0
        current.append(i)
        total += size
    if current:
        groups.append(current)
    return groups
