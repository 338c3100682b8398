"""The ``[[schedules]]`` entries: recurring plans, their cron shapes and time zones."""

from __future__ import annotations

import re
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator

from curaflow.config.base import ID_PATTERN, Section

CRON_DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly", "@every")
CRON_FIELD = re.compile(r"^[0-9A-Za-z*?/,#-]+$")


#: Names the time-zone database holds that name no zone of a place (``timezone`` refuses them).
NOT_ZONES = frozenset({"localtime", "posixrules", "Factory"})


class ScheduleConfig(Section):
    """A recurring plan (Temporal Schedule): one job per occurrence."""

    id: str
    cron: list[str]
    timezone: str = "UTC"
    target_ids: list[str] = Field(default_factory=list)
    jitter_ms: int = Field(default=0, ge=0)
    paused: bool = False

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not ID_PATTERN.match(value):
            raise ValueError("schedule id must match [A-Za-z0-9_-]{1,64}")
        return value

    @field_validator("cron", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("cron")
    @classmethod
    def _cron_shape(cls, value: list[str]) -> list[str]:
        # The shapes Temporal's ScheduleSpec.cron_expressions accepts: 5 fields, or 6-7
        # with seconds first / year last, or a descriptor (@daily, @every 1h). The server
        # checks the field values when the schedule is created; this catches the typos
        # (a missing field, a stray word) when the configuration is loaded.
        if not value:
            raise ValueError("cron needs at least one expression")
        for expression in value:
            text = expression.strip()
            fields = text.split()
            if text.startswith("@"):
                if (
                    fields[0] not in CRON_DESCRIPTORS
                    or (fields[0] == "@every") != (len(fields) == 2)
                    or len(fields) > 2
                ):
                    raise ValueError(
                        f"cron {expression!r}: unknown descriptor (use one of {', '.join(CRON_DESCRIPTORS)})"
                    )
            elif not 5 <= len(fields) <= 7 or not all(CRON_FIELD.match(f) for f in fields):
                raise ValueError(f"cron {expression!r}: expected 5 fields (minute hour day month weekday)")
        return value

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        # Files of the time-zone database that are no IANA zone (2026-12-07; before, any
        # name ZoneInfo could open was taken): "localtime" is each host's own zone — the
        # Temporal server's for the cron, each worker's for the job id —, "Factory" and
        # "posixrules" are no place's, "right/…" counts leap seconds (Python reads 02:00Z in
        # December as Berlin's 04:00+0200) and "posix/…" duplicates the zone under another name.
        if value in NOT_ZONES or value.startswith(("right/", "posix/")):
            raise ValueError(f"not an IANA time zone {value!r} (a place's name such as 'Europe/Berlin', or 'UTC')")
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown timezone {value!r} (an IANA name such as 'Asia/Tokyo' or 'UTC')") from None
        return value
