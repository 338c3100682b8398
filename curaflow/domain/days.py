"""A day as curaflow's settings write it: ``YYYY-MM-DD`` of the calendar.

The one reading of a day a setting gives — a target's date filters (read by every
source's date filter as written, :func:`curaflow.sources.filters.reject_reason`) and
Pixiv's ``ranking_date`` (:mod:`curaflow.sources.pixiv.query_words`) — and what Pixiv's
app-api takes for a search's ``start_date`` / ``end_date`` and a ranking's ``date``
(anything else is an error: reference ``pixiv-and-delivery-apis.md`` §2.2).
"""

from __future__ import annotations

import re
from datetime import date

#: A day: ``YYYY-MM-DD`` in ASCII digits (fullwidth digits, another separator, a time or
#: a blank around it are no day Pixiv reads).
DAY_PATTERN = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def day_problem(value: str) -> str | None:
    """What keeps ``value`` from being a day of :data:`DAY_PATTERN` that the calendar has,
    or None (``"not of that form"``, ``"month must be in 1..12"``, ``"day is out of range
    for month"``)."""
    if not DAY_PATTERN.fullmatch(value):
        return "not of that form"
    try:
        date.fromisoformat(value)
    except ValueError as err:
        return str(err)
    return None
