"""Deterministic splitting of a work's pages into the parts one route request can carry."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
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


def resumed_parts(
    items: Sequence[T],
    posted: Sequence[int],
    split: Callable[[Sequence[T]], list[list[T]]],
    *,
    partial_last: bool = False,
) -> list[list[T]]:
    """The parts a delivery resumed after ``posted`` sends: ``split(items)`` when the
    recorded parts are its leading parts, else the recorded parts as they were followed by
    ``split`` of the pages after them — so every page goes exactly once, whatever split
    the earlier attempts used.

    The split depends on the route's limits (``max_message_bytes``, ``max_request_bytes``),
    which may differ between the attempt that posted the first parts and the one that
    resumes (a worker with another configuration during a rolling change, a restart with
    the lower limit a 413's message asks for). Read by part number under another split, a
    resumed delivery skipped pages (a recorded part of one page taken for the current
    split's part of ten: the work reported delivered with nine pages never posted) or
    posted pages twice (until 2026-12-06).

    Args:
        items: every page of the work, in order.
        posted: the number of pages each recorded part carries, in order (one entry per
            part confirmed by earlier attempts; a route records one element per page).
        split: the route's split of a run of pages into parts (its current limits).
        partial_last: the last recorded part may carry fewer pages than the split's part
            at its place (a Telegram album recorded partly posted before 2026-12-07), the route sending the rest of
            that part; otherwise a shorter recorded part is another split's.

    Returns:
        The parts, whose first ``len(posted)`` carry exactly the recorded pages when the
        split is not the recorded one (the pages past the work's end, if the records
        name more, are none).
    """
    parts = split(items)
    if not posted:
        return parts
    n = len(posted)
    lengths = [len(part) for part in parts]
    last_fits = n <= len(parts) and (posted[-1] == lengths[n - 1] or (partial_last and 0 < posted[-1] < lengths[n - 1]))
    if last_fits and all(posted[i] == lengths[i] for i in range(n - 1)):
        return parts
    resumed: list[list[T]] = []
    start = 0
    for count in posted:
        resumed.append(list(items[start : start + count]))
        start += count
    return resumed + split(items[start:])
