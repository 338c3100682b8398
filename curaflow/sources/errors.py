"""Errors of a source call, already classified into terminal reason codes."""

from __future__ import annotations

from enum import StrEnum

from curaflow.domain.reasons import TerminalReason
from curaflow.domain.tally import SOURCE_ANSWER_KINDS
from curaflow.domain.text import clean_text
from curaflow.observability.secrets import redacted


class SourceError(Exception):
    """A source call failed.

    Attributes:
        reason: the terminal reason code it maps to (``rate_limited``, ``auth_failed``,
            ``remote_http_error``, ``network_error``, ``download_failed`` …).
        retryable: whether another attempt may succeed.
        retry_after_s: a delay the source asked for (``Retry-After``), if any.
        cooldown_s: the exact wait before another attempt, decided by the account's rate
            gate (its cooldown ladder with ``Retry-After`` as the floor, up to the ladder's cap); when set it is
            the activity's ``next_retry_delay``.
        status: the HTTP status, if there was a response.
        hint: what the operator can do about it, in the source's own words (e.g. how to
            lift a restriction of the source instance's account), for the logs; None.

    The message may quote the source's error text: it is cleaned
    (:func:`~curaflow.domain.text.clean_text`) so it can be stored and sent, and holds
    none of the secrets the process holds (:func:`~curaflow.observability.secrets.redacted`:
    the source guard quotes a source's own exception, whose words may quote one).
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
        hint: str | None = None,
    ) -> None:
        super().__init__(redacted(clean_text(message)))
        self.reason = reason
        self.retryable = retryable
        self.retry_after_s = retry_after_s
        self.cooldown_s = cooldown_s
        self.status = status
        self.hint = hint


class UnavailableKind(StrEnum):
    """Why a work is unavailable: always a property of the work, recognised positively.

    Counted per kind in the cell's candidate report
    (:attr:`~curaflow.domain.models.CandidateReport.unavailable`), so the job's message
    can say what happened to the works examined. A transient failure (network, 5xx, a
    timeout, a body cut short) is never one of these: it is a retried ``SourceError``.

    * ``gone`` — the source says so: deleted, private, restricted (the default: what a
      source means when it raises without a kind); an image answering 404/410 too,
      recognised as the work's only once the source's own detail of the work says it is
      gone (:attr:`WorkUnavailable.corroborate`); an image or a detail answering a bare
      403, a detail's 404 that is not the source's own error answer (an HTML page, an
      empty body), or a detail answering Pixiv's "restricted" object (the app-api's own,
      under a 2xx or a 4xx: what a restricted account gets for every request), not
      recognised as the work's (held briefly: :attr:`WorkUnavailable.recognised`);
    * ``unusable_url`` — a file URL of the work the source may not request: another host,
      a path not strictly under the image host's prefix, not a URL (none at all: a
      listing without its image field), too long
      (:data:`~curaflow.sources.base.MAX_URL_CHARS`), answered 414 (never recognised as
      the work's, below);
    * ``too_large`` — a page or a frames zip whose bytes went over its byte limit (never
      its announced ``Content-Length`` alone: such a body is read); the work's only when
      an image of the size the source describes could be that large
      (:func:`~curaflow.sources.corroboration.sized`, asked by the artifact store, which
      knows the page): a body larger than any image of those dimensions could be is what
      the host sent (a broken mirror streaming the same huge body for every work), held
      briefly; never recognised by its raiser, which knows only the bytes;
    * ``not_an_image`` — a page that is no PNG, JPEG (an MPO included), GIF or WebP (by its
      bytes), or a whole image that is not the picture its source lists — another aspect
      ratio than the listed size's (:func:`~curaflow.sources.corroboration.not_the_listed_picture`:
      a placeholder answered for the page, 2026-12-07); not recognised as the work's, held
      briefly;
    * ``undecodable`` — a page whole by its own framing (PNG's IEND, JPEG's EOI, …) that
      does not decode: the image host holds these bytes;
    * ``over_budget`` — decoding it would cost more than the decode budget (pixels over
      every frame, frames, CPU time: :mod:`curaflow.sources.decoding`); over its CPU time
      not recognised as the work's (a measure of the machine too, held briefly:
      :attr:`~curaflow.sources.decoding.OverBudget.recognised`);
    * ``unusable_animation`` — an animated work's metadata or frames zip of the source's
      shape that describes no animation (no frames, a frame without a delay, a zip URL
      that is not one, a frame missing from a whole zip, a frame that does not decode);
    * ``no_file`` — the work lists no page and is no animation: nothing to deliver.

    ``unusable_url``, ``not_an_image`` and ``no_file`` are what the source *answered* for
    the work (:data:`~curaflow.domain.tally.SOURCE_ANSWER_KINDS`), never recognised as the
    work's own (:attr:`WorkUnavailable.recognised`).
    """

    GONE = "gone"
    UNUSABLE_URL = "unusable_url"
    TOO_LARGE = "too_large"
    NOT_AN_IMAGE = "not_an_image"
    UNDECODABLE = "undecodable"
    OVER_BUDGET = "over_budget"
    UNUSABLE_ANIMATION = "unusable_animation"
    NO_FILE = "no_file"


#: How many of a body's first bytes :attr:`WorkUnavailable.head` keeps (enough for every
#: signature :func:`~curaflow.sources.decoding.signed_format` reads, and a zip's).
HEAD_BYTES = 32


class WorkUnavailable(Exception):
    """A single work cannot be used (deleted, private, restricted placeholder, 403/404,
    an unusable URL or animation, over the decode budget: :class:`UnavailableKind`).

    Candidate-level: the scan skips it and moves on; it never fails the cell by itself.
    ``why`` (the source's words) is cleaned of characters that cannot be stored.

    Attributes:
        work_id: the work (as the raiser knows it; for messages).
        why: what was seen, cleaned.
        kind: why, as a word (:class:`UnavailableKind`; ``gone`` when not given).
        recognised: the answer says something positive about this work (a detail
            answering the app-api's own 404, the page's own bytes over a bound …), as
            the raiser states it (never by default): the work is remembered
            unavailable for the source's ``unavailable_ttl_ms``. False (the default: a
            source that does not say) for an answer that would come for any work
            while it lasts — the image host answering 403 (what it answers a request it
            refuses: a missing ``Referer``, a hotlink rule, a blocked caller), a page that
            is no image (an HTML or JSON page where the image was): the work is skipped
            in this job and held back for ``unrecognised_hold_ms`` only
            (:class:`~curaflow.sources.base.SourcePolicy`), so an hour of a refusing
            host never costs a week of works. **Never true for a kind of
            :data:`~curaflow.domain.tally.SOURCE_ANSWER_KINDS`** (``unusable_url``,
            ``not_an_image``, ``no_file``), whatever the raiser says: a URL off the image
            host or of another shape, no URL at all, no file listed, a page that is no
            image are what the source answered — a renamed field, a moved image host, a
            tampered answer give it for every work — not a fact of the work (DESIGN.md
            "Work-owned failures and the decode budget"; until 2026-12-05 a listing
            without its image field cost every work its jobs examined for the week).
        corroborate: the answer says the work's *file* is not there (an image host's
            404/410, a frames zip's), which a misconfigured image mirror or proxy, a CDN
            in a deploy or a moved path answers every work while it lasts: it is the
            work's only when the source's own description of the work says the work is
            gone (:meth:`~curaflow.sources.base.Source.work` raising a recognised
            ``WorkUnavailable``), asked by
            :func:`~curaflow.sources.corroboration.corroborated` once the answer came —
            never on the way to a page that answers. ``recognised`` is False while it is
            set, whatever the raiser says (2026-12-05: any image 404 cost the work the
            week).
        limit_bytes: for ``too_large``, the byte limit the body went over (None: not
            said). The raiser's ``recognised`` is kept only with it; the artifact store
            settles it by the page's size (:func:`~curaflow.sources.corroboration.sized`).
        head: for ``too_large``, the body's first bytes as the artifact store received
            them (up to :data:`HEAD_BYTES`; None: not known) — whether they begin as the
            file it must be, which :func:`~curaflow.sources.corroboration.sized` asks first.
    """

    def __init__(
        self,
        work_id: str,
        why: str,
        kind: UnavailableKind = UnavailableKind.GONE,
        *,
        recognised: bool = False,
        corroborate: bool = False,
        limit_bytes: int | None = None,
    ) -> None:
        why = redacted(clean_text(why))
        super().__init__(clean_text(f"work {work_id} unavailable: {why}"))
        self.work_id = work_id
        self.why = why
        self.kind = UnavailableKind(kind)
        self.limit_bytes = limit_bytes
        self.head: bytes | None = None
        self.corroborate = corroborate and self.kind.value not in SOURCE_ANSWER_KINDS
        self.recognised = (
            recognised
            and not corroborate
            and self.kind.value not in SOURCE_ANSWER_KINDS
            # A body over its limit, as its raiser saw it: the artifact store settles it
            # by the page's size (curaflow.sources.corroboration.sized).
            and not (self.kind is UnavailableKind.TOO_LARGE and limit_bytes is not None)
        )
