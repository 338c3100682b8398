"""Errors of a source call, already classified into terminal reason codes."""

from __future__ import annotations

from curaflow.domain.reasons import TerminalReason
from curaflow.domain.text import clean_text


class SourceError(Exception):
    """A source call failed.

    Attributes:
        reason: the terminal reason code it maps to (``rate_limited``, ``auth_failed``,
            ``remote_http_error``, ``network_error``, ``download_failed`` …).
        retryable: whether another attempt may succeed.
        retry_after_s: a delay the source asked for (``Retry-After``), if any.
        cooldown_s: the exact wait before another attempt, decided by the account's rate
            gate (its cooldown ladder with ``Retry-After`` as the floor); when set it is
            the activity's ``next_retry_delay``.
        status: the HTTP status, if there was a response.

    The message may quote the source's error text: it is cleaned
    (:func:`~curaflow.domain.text.clean_text`) so it can be stored and sent.
    """

    def __init__(
        self,
        reason: TerminalReason,
        message: str,
        *,
        retryable: bool = True,
        retry_after_s: float | None = None,
        cooldown_s: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(clean_text(message))
        self.reason = reason
        self.retryable = retryable
        self.retry_after_s = retry_after_s
        self.cooldown_s = cooldown_s
        self.status = status


class WorkUnavailable(Exception):
    """A single work cannot be used (deleted, private, restricted placeholder, 403/404).

    Candidate-level: the scan skips it and moves on; it never fails the cell by itself.
    ``why`` (the source's words) is cleaned of characters that cannot be stored.

    ``source_wide``: the reason lies in what the source sent for the work, in a way that
    would hold for any work — an image URL on a host that is not the source's image host
    — rather than in the work (gone, private, too big). Only positive recognition sets
    it. The work still moves aside, counted ``unusable`` in the cell's tally; a search
    whose every work was unusable is the source's failure (``source_unusable``,
    :func:`curaflow.domain.verdicts.no_candidate_verdict`).
    """

    def __init__(self, work_id: str, why: str, *, source_wide: bool = False) -> None:
        why = clean_text(why)
        super().__init__(clean_text(f"work {work_id} unavailable: {why}"))
        self.work_id = work_id
        self.why = why
        self.source_wide = source_wide
