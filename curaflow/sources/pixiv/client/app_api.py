"""The app-api client itself: the account's access token (the refresh-token grant) and the
API calls (search, ranking, paging, a work's detail, an ugoira's metadata)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from curaflow.domain.models import Work
from curaflow.domain.reasons import TerminalReason
from curaflow.observability.secrets import hold
from curaflow.outbound import AnswerTooLarge, Limits, Outbound, as_outbound, configured
from curaflow.sources.animation import Animation, UnusableAnimation
from curaflow.sources.errors import SourceError, UnavailableKind, WorkUnavailable
from curaflow.sources.gate import Gate
from curaflow.sources.pixiv.client.answers import (
    OAUTH_ERROR_STATUS,
    OffsetRefused,
    answered_refresh_token,
    error_text,
    grant_of,
    grant_words,
    is_app_api_400,
    json_body,
    oversized_failure,
    reason_for_status,
    refuses_grant,
    refuses_offset_alone,
    refuses_request,
    refuses_token,
    says_a_token,
    says_gone,
    says_restricted,
    too_large,
)
from curaflow.sources.pixiv.client.constants import (
    CLIENT_ID,
    CLIENT_SECRET,
    DOWNLOAD_MAX_BYTES,
    DOWNLOAD_TIMEOUT_S,
    OAUTH_MARKS,
    PAGE_MAX_BYTES,
    PIXIV_API_URL,
    PIXIV_AUTH_URL,
    REFRESH_MARGIN_S,
    RESTRICTED_HINT,
    app_headers,
    image_destinations,
    refresh_margin_s,
    token_lifetime_s,
    usable_token,
)
from curaflow.sources.pixiv.client.images import ImageRequests
from curaflow.sources.pixiv.client.works import InvalidWork, parse_work, search_texts
from curaflow.sources.pixiv.ugoira import UnrecognisedMetadata, parse_metadata
from curaflow.sources.tokens import TokenStore


def _offset_asked(params: dict[str, Any] | None) -> int:
    """The ``offset`` a request's parameters ask (0: none, or not a number)."""
    raw = (params or {}).get("offset")
    try:
        return int(raw) if raw is not None else 0
    except (TypeError, ValueError):
        return 0


class PixivClient(ImageRequests):
    """Async Pixiv app-api client.

    Args:
        http: the API's outbound client (a plain ``httpx.AsyncClient`` is wrapped,
            limited to ``api_url`` / ``auth_url``).
        images: the image host's outbound client (None: ``http``, limited by
            :func:`image_destinations`).
        request_timeout_s / page_max_bytes: total time (s) and largest answer (bytes)
            of one API or auth request.
        download_timeout_s / download_max_bytes: total time (s) and largest body
            (bytes) of one image.
        refresh_token: the account's refresh token (any non-empty string in replay mode).
        api_url / auth_url: base URLs (Pixiv's or the replay server's).
        image_referer: ``Referer`` sent with image requests (i.pximg.net answers 403
            without it).
        gate: the account's rate gate, passed before every request (None: no gate).
        image_host: where Pixiv's image host ``https://i.pximg.net`` is reached (None:
            itself). Works keep Pixiv's canonical image URLs — also in replay mode, where
            the replay answers them like Pixiv — and each request is mapped onto
            ``<image_host>/<path>`` at the moment it is sent (:meth:`image_url`), so a
            fetch that a dead worker began resumes through another worker's own replay
            server (``http://127.0.0.1:<its port>/i``).
        clock: monotonic seconds, for the access token's expiry (tests pass a fake one).
        token_store: where a refresh token Pixiv rotates is kept
            (:mod:`curaflow.sources.tokens`): read before each token request (a token
            rotated from ``refresh_token``, by any worker, is sent first), written when the
            token endpoint answers another refresh token than the one sent, its token
            forgotten when Pixiv refuses it and the configured one is accepted, a token
            answered beside an unusable access token proposed as its candidate (sent
            first at the next refresh, then settled); None: memory only.
    """

    def __init__(
        self,
        http: httpx.AsyncClient | Outbound,
        *,
        refresh_token: str,
        api_url: str = PIXIV_API_URL,
        auth_url: str = PIXIV_AUTH_URL,
        image_referer: str = "https://app-api.pixiv.net/",
        gate: Gate | None = None,
        image_host: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        images: httpx.AsyncClient | Outbound | None = None,
        request_timeout_s: float = 30.0,
        page_max_bytes: int = PAGE_MAX_BYTES,
        download_timeout_s: float = DOWNLOAD_TIMEOUT_S,
        download_max_bytes: int = DOWNLOAD_MAX_BYTES,
        token_store: TokenStore | None = None,
    ) -> None:
        self._clock = clock
        self._configured_token = refresh_token
        self._tokens = token_store
        #: Writes to the token store not done yet, in order: (what, token), ``what`` one of
        #: ``save``, ``forget``, ``propose``, ``settle`` (:class:`TokenStore`'s methods).
        self._unsaved: list[tuple[str, str]] = []
        #: A refresh token answered beside an unusable access token, not yet settled.
        self._candidate: str | None = None
        self.image_host = image_host.rstrip("/") if image_host else None
        self._refresh_token = refresh_token
        self.api_url = api_url.rstrip("/")
        self.auth_url = auth_url.rstrip("/")
        self._out = as_outbound(http, configured(self.api_url, self.auth_url))
        self._images = as_outbound(images or self._out.http, image_destinations(self.image_host))
        self._api_limits = Limits(time_s=request_timeout_s, max_bytes=page_max_bytes)
        self._image_limits = Limits(time_s=download_timeout_s, max_bytes=download_max_bytes)
        self.image_referer = image_referer
        self._gate = gate
        self._access_token: str | None = None
        self._expires_at = 0.0
        self._margin_s = float(REFRESH_MARGIN_S)
        self._auth_lock = asyncio.Lock()

    # ---- auth ---------------------------------------------------------------------

    async def authenticate(self, *, force: bool = False, refused: str | None = None) -> str:
        """Return a valid access token, refreshing it when missing, near expiry or forced.

        ``refused``: the access token the app-api just refused — refreshed only while it is
        still the current one: calls that met the same refusal together refresh it once,
        the others taking the token the first one got (each refreshing on its own asked
        the token endpoint once per call, and replaced a token another call had just got).

        Raises:
            SourceError: ``auth_failed`` (non-retryable) only for an HTTP 400 whose
                ``error`` is ``invalid_grant`` with words naming the refresh token
                (Pixiv's refusal of it, :func:`refuses_grant`) to each of the account's tokens in turn — the token
                store's, this client's own, the configured one, each sent once; ``rate_limited`` for a rate limit;
                ``network_error`` / ``remote_http_error`` (retryable) for anything else,
                any other 400 and the word in any other status included.
            TokenStoreUnavailable: the token store (the ledger) failed to read or write
                a rotated refresh token (curaflow's failure, retried; the token stays in
                memory and its write is tried again at the next call).
        """
        async with self._auth_lock:
            await self._keep_rotated_token()
            token = self._access_token
            if token and not force and token != refused and self._clock() < self._expires_at - self._margin_s:
                return token
            tried: list[str] = []
            while True:
                # The ledger's token first (another worker of the account may have rotated
                # the one this worker holds away), then this worker's, then the configured
                # one: each sent once, and the account blamed only when all are refused.
                # A candidate (a token answered beside an unusable access token) before
                # them all: Pixiv may have revoked every other on answering it.
                stored = usable_token(await self._tokens.load(self._configured_token)) if self._tokens else None
                proposed = usable_token(await self._tokens.candidate(self._configured_token)) if self._tokens else None
                candidates = (proposed, self._candidate, stored, self._refresh_token, self._configured_token)
                sending = next((c for c in candidates if c is not None and c not in tried), None)
                if sending is None:
                    raise SourceError(
                        TerminalReason.AUTH_FAILED,
                        f"pixiv refresh token rejected (invalid_grant): the account's {len(tried)} tokens refused",
                        retryable=False,
                        status=OAUTH_ERROR_STATUS,
                    )
                tried.append(sending)
                body = await self._token_answer(sending)
                if body is not None:
                    break
            await self._gate_ok()
            self._access_token = usable_token(body["access_token"])
            lifetime = token_lifetime_s(body.get("expires_in"))
            self._margin_s = refresh_margin_s(lifetime)
            self._expires_at = self._clock() + lifetime
            # Anything but a usable token keeps the one sent (RFC 6749 §6).
            kept = usable_token(body.get("refresh_token")) or sending
            self._refresh_token = kept
            if kept != stored and kept != self._configured_token:
                self._unsaved.append(("save", kept))
            elif kept == self._configured_token and stored is not None:
                self._unsaved.append(("forget", stored))  # the ledger's token was refused: forget it
            # A candidate sent is settled: refused, dropped; accepted, kept above.
            self._unsaved += [("settle", c) for c in dict.fromkeys((proposed, self._candidate)) if c in tried]
            if self._candidate in tried:
                self._candidate = None
            await self._keep_rotated_token()
            return self._access_token  # type: ignore[return-value]

    async def _token_answer(self, refresh_token: str) -> dict[str, Any] | None:
        """Ask the token endpoint for an access token with ``refresh_token``: its grant
        (:func:`grant_of`: the object holding a usable ``access_token``, the answer's top
        level or Pixiv's copy under ``response``), or None when it refuses the grant.

        Raises:
            SourceError: as :meth:`authenticate`, but ``invalid_grant``.
        """
        hold(refresh_token)  # a rotated one is no setting: held as it is sent (curaflow.observability.secrets)
        await self._pass_gate()
        try:
            response = await self._out.request(
                "POST",
                f"{self.auth_url}/auth/token",
                limits=self._api_limits,
                data={
                    "client_id": CLIENT_ID,
                    "client_secret": CLIENT_SECRET,
                    "grant_type": "refresh_token",
                    "refresh_token": refresh_token,
                    "get_secure_url": "1",
                    "include_policy": "true",
                },
                headers=app_headers(),
            )
        except AnswerTooLarge as err:
            raise too_large(err, auth=True) from err
        except httpx.HTTPError as err:
            raise SourceError(TerminalReason.NETWORK_ERROR, f"pixiv auth: {type(err).__name__}") from err
        body = json_body(response)
        await self._check_rate_limit(response, body)
        if refuses_grant(response.status_code, body):
            # Only the grant's own error answer (HTTP 400, ``invalid_grant``, words naming
            # the refresh token) blames the refresh token sent. Any other answer — another
            # OAuth error (``invalid_request``, ``invalid_client``: the app's), the word
            # with words about something else (a retired grant type: every account's), a
            # proxy's page, an empty body, the word in a 5xx, a 200 or a redirect — is the
            # source's, retried below.
            return None
        granted = 200 <= response.status_code < 300
        # The grant at the top level, else Pixiv's copy of it under ``response`` (grant_of).
        grant = grant_of(body) if granted else None
        if grant is not None:
            hold(grant["access_token"], usable_token(grant.get("refresh_token")))
            if usable_token(grant.get("refresh_token")) is None:
                # The grant names no refresh token it rotated to, yet the answer's other
                # copy may (the top level's dropped, ``response``'s whole): Pixiv may have
                # revoked the one sent, so that one is kept as the account's candidate
                # (2026-12-07: it was dropped, and the next refresh ended auth_failed).
                await self._keep_candidate(refresh_token, answered_refresh_token(body))
            return grant
        if granted and isinstance(body, dict):
            await self._keep_candidate(refresh_token, answered_refresh_token(body))
        if not granted or not says_a_token(body):
            # A 3xx is never followed: its body (a cache's, a gateway's) is no token.
            reason = reason_for_status(response.status_code, body)
            said = " ".join(w for w in (error_text(body), grant_words(body)) if w)
            raise SourceError(
                reason,
                f"pixiv auth answered HTTP {response.status_code}" + (f": {said[:200]}" if said else ""),
                status=response.status_code,
            )
        # Not the refresh token's fault: sent on, it would be refused twice and blamed on
        # the account (auth_failed). The source's glitch, retried.
        raise SourceError(
            TerminalReason.REMOTE_HTTP_ERROR,
            "pixiv auth answered an access token curaflow cannot use (not text of printable ASCII)",
            status=response.status_code,
        )

    async def _keep_candidate(self, sent: str, answered: object) -> None:
        """Keep ``answered``, the refresh token of an answer to ``sent`` whose access token
        is unusable, as the account's candidate (:mod:`curaflow.sources.tokens`): Pixiv may
        have revoked ``sent`` on answering it. Nothing when it is no usable token or one
        curaflow holds already.

        Raises:
            TokenStoreUnavailable: the store could not be written (the attempt is retried;
                the candidate stays in memory, its write tried again at the next call).
        """
        rotated = usable_token(answered)
        if rotated is None or rotated in (sent, self._refresh_token, self._configured_token):
            return
        hold(rotated)
        self._candidate = rotated
        self._unsaved.append(("propose", rotated))
        await self._keep_rotated_token()

    async def _keep_rotated_token(self) -> None:
        """Write to the token store what the refreshes learnt and it does not hold yet, in
        order: a rotated refresh token to keep, the store's token Pixiv refused to forget, a
        candidate to propose or settle (a failed write is tried again at the next
        :meth:`authenticate`: the token stays in memory).

        Raises:
            TokenStoreUnavailable: the store could not be written (the attempt is retried).
        """
        if self._tokens is None:
            self._unsaved.clear()
            return
        while self._unsaved:
            what, token = self._unsaved[0]
            await getattr(self._tokens, what)(self._configured_token, token)
            self._unsaved.pop(0)

    def expire_access_token(self) -> None:
        """Forget the access token's lifetime so the next call refreshes it (tests, ops)."""
        self._expires_at = 0.0

    # ---- requests -----------------------------------------------------------------

    async def _get(
        self, url: str, params: dict[str, Any] | None = None, *, work_id: str | None = None
    ) -> dict[str, Any]:
        """GET an app-api URL with auth, error-body detection and one refresh on OAuth errors.

        An OAuth error (:data:`OAUTH_MARKS`) refreshes the access token once and asks
        again; refused again, the answer is the source's (``remote_http_error``, retried):
        only the token endpoint's ``invalid_grant`` (:meth:`authenticate`) is the account's.
        So does the app-api's own 400 (:func:`is_app_api_400`) in words not recognised —
        Pixiv's refusal of an access token has that status and shape — before it is read
        as the request's (or the work's) refusal, and a 401 in any shape (:func:`refuses_token`).

        Raises:
            SourceError: classified failure; final (``retryable`` False) only for the
                app-api's own 400 refusing the request's parameters in its validator's
                shape, naming only parameters the request carried (:func:`refuses_request`),
                to a request of no work (a search, a ranking, a page), retried for any
                other 4xx, in any shape or words, and for that refusal naming a parameter
                never sent (another request's answer: a cache or a proxy keyed wrongly).
            OffsetRefused: that refusal naming ``offset`` alone for a page asked past
                offset 0 (:func:`refuses_offset_alone`): the limit of the app-api's pages
                lies before it (final too; a scan takes it for its walk's last offset).
            WorkUnavailable: a work-level refusal when ``work_id`` is given: recognised as
                the work's for the app-api's own 404 saying in Pixiv's words that the work
                is gone (:func:`says_gone`); not recognised (held back briefly) for a bare 403, a
                404 of another shape or without such words, the app-api's own 400 in any
                words (:func:`is_app_api_400`), an answer over ``outbound.page_max_bytes``
                under a 2xx (:func:`too_large`, final only for a request of no work; under another
                status judged by it, :func:`oversized_failure`), or the app-api's "restricted"
                object under a 2xx or a 4xx (:func:`says_restricted`: a restricted account
                gets it for every request); the words in another shape or under a 5xx or a
                redirect are retried (``remote_http_error``).
            SourceError ``account_restricted`` (not retryable, the account's gate paused)
                only for the app-api's own error object saying the account is restricted
                (:func:`says_restricted`); the words in another shape are retried.
        """
        refreshed = False
        while True:
            token = await self.authenticate()
            await self._pass_gate()
            headers = {**app_headers(), "Authorization": f"Bearer {token}"}
            try:
                response = await self._out.request("GET", url, params=params, headers=headers, limits=self._api_limits)
            except AnswerTooLarge as err:
                head = oversized_failure(err)
                if head is None:
                    if work_id is not None:
                        # Asked of one work, an answer never seen about it (a proxy's page,
                        # a body that never ends): held back briefly, the cell moving on —
                        # as the app-api's own 400 is. Until 2026-12-06 it ended the job at
                        # its first answer, nothing held back: the target's later jobs met
                        # the work first again and ended so.
                        raise WorkUnavailable(work_id, str(too_large(err))) from None
                    raise too_large(err) from err
                # A status that is no page's (a 5xx, a 3xx, a 429, a 4xx): judged by its
                # status as any answer whose body is not the app-api's, below — nothing of
                # the body read (2026-12-07: a gateway's error page over the limit ended
                # the job at its first answer, or held the work asked back).
                response = head
            except httpx.TimeoutException as err:
                raise SourceError(TerminalReason.NETWORK_ERROR, f"pixiv timeout: {type(err).__name__}") from err
            except httpx.HTTPError as err:
                raise SourceError(TerminalReason.NETWORK_ERROR, f"pixiv network: {type(err).__name__}") from err
            body = json_body(response)
            text = error_text(body)
            lowered = (text or "").lower()
            await self._check_rate_limit(response, body)
            oauth = text is not None and any(m in lowered for m in OAUTH_MARKS)
            if not oauth and not refreshed and refuses_token(response.status_code, body):
                # The app-api's own 400 is also how it refuses an access token it no longer
                # takes (pixivpy #182), told apart from its refusal of the request only by
                # words: in words never seen, the token is refreshed once and the request
                # asked again — a request refused is refused again (final below only in the
                # validator's shape, refuses_request; else one retried attempt), a token
                # refused passes (until 2026-12-06 the job ended at its first answer). So is
                # a 401, a bearer token's refusal (RFC 6750 §3.1) in any shape: until
                # 2026-12-07 it was retried with the very token refused, every attempt of
                # the account's jobs the same 401 until the token's lifetime ran out.
                refreshed = True
                await self.authenticate(refused=token)
                continue
            if oauth:
                if refreshed:
                    # The token endpoint has just accepted the refresh token: the account's
                    # token is good. An app-api still refusing the fresh access token (its
                    # replicas lagging, a wording that merely mentions OAuth) is the
                    # source's, and costs this attempt — never ``auth_failed``, which tells
                    # the operator to replace the account's token.
                    raise SourceError(
                        TerminalReason.REMOTE_HTTP_ERROR,
                        f"pixiv refused an access token it had just issued (HTTP {response.status_code}): "
                        f"{(text or '')[:200]}",
                        status=response.status_code,
                    )
                refreshed = True
                await self.authenticate(refused=token)
                continue
            restricted = says_restricted(response.status_code, body)
            sent = frozenset(params or ())  # the names of the parameters the request carried
            refused = refuses_request(response.status_code, body, sent)
            if work_id is not None and (
                response.status_code in (403, 404) or restricted or is_app_api_400(response.status_code, body)
            ):
                # Only the app-api's own 404 saying in Pixiv's words that the work was deleted
                # or never existed is about the work (says_gone; its object in other words or
                # none is the server's: an endpoint it no longer serves, 2026-12-07). The
                # "restricted" object (says_restricted: the app-api's own, under a 2xx or a
                # 4xx) is what a restricted *account* gets for every request too (the
                # search's answer pauses the account, below), and a work the source
                # restricts is listed as a placeholder — judged by the listing, before any
                # request of it — so for a work listed whole it does not name the work; a
                # bare 403, or a 404 not in the app-api's words (an HTML page, an empty body:
                # a moved endpoint, a proxy — what every work would get), is the API refusing
                # the request. Those are held back briefly, not the week. The words in
                # another shape, or the object under a 5xx or a redirect, are no answer of
                # the app-api's about anything: one retried attempt, below (until 2026-12-06
                # the words in any answer held the work for the hour). The app-api's own 400
                # (is_app_api_400, any words) refuses what was asked — asked of one work, an answer
                # never seen about it, in words never seen: held back briefly too, the cell
                # moving on (until 2026-12-06 it ended the job at its first answer, nothing
                # held back: the target's later jobs met the work again and ended so).
                recognised = says_gone(response.status_code, body)
                raise WorkUnavailable(work_id, text or f"HTTP {response.status_code}", recognised=recognised)
            if restricted:
                # Not one work: the account. Retrying cannot lift it; pause the account.
                # Only the app-api's own error object says so: the words in another shape
                # are the source's, retried below.
                pause_s = await self._gate.restricted() if self._gate is not None else None
                raise SourceError(
                    TerminalReason.ACCOUNT_RESTRICTED,
                    "pixiv answered 'Your access is currently restricted.' (HTTP "
                    f"{response.status_code}): the account is restricted"
                    + (f"; its requests are paused for {pause_s:.0f} s" if pause_s else ""),
                    retryable=False,
                    status=response.status_code,
                    hint=RESTRICTED_HINT,
                )
            if not 200 <= response.status_code < 300 or text is not None or not isinstance(body, dict):
                status = response.status_code
                # A 2xx that is not the app-api's JSON object (not JSON, nested too deep
                # to parse), or that carries an error text none of the marks above
                # recognised, is the source's glitch, retried like a 5xx. A 4xx is final
                # only as the app-api's own 400 refusing the request's parameters in its
                # validator's shape naming only parameters the request carried
                # (refuses_request; in other words one retried attempt, 2026-12-07: it
                # ended the job at its first answer; naming a parameter never sent —
                # illust_id to a search: a cache or proxy keyed wrongly — one retried
                # attempt too, 2026-12-07); a 4xx of another
                # shape — an HTML page, an empty body, another JSON — is what a proxy, a CDN
                # or a moved endpoint answers every request while it lasts, and the
                # app-api's object under another 4xx (a 403, a 404, a 410 with words never
                # seen) says nothing of the request: one attempt,
                # retried with backoff (until 2026-12-05 the former, until 2026-12-06 the
                # latter ended the job at its first answer). A 3xx (redirects are never
                # followed) sends the request elsewhere: the JSON it carries — a cache's, a
                # gateway's, a stale answer replayed — answers nothing that was asked, one
                # attempt too (until 2026-12-06 its object was read as the app-api's answer).
                garbled = 200 <= status < 300 and text is None
                asked_at = _offset_asked(params)
                if asked_at > 0 and refuses_offset_alone(status, body, sent):
                    # The limit of the app-api's pages lies before the offset asked: a
                    # scan paging to it takes it for its walk's last offset (OffsetRefused,
                    # 2026-12-07); at offset 0, or naming other parameters, the request's own.
                    raise OffsetRefused(
                        asked_at, f"pixiv refused offset {asked_at} (HTTP {status}): {(text or '')[:200]}"
                    )
                raise SourceError(
                    reason_for_status(status, body),
                    f"pixiv answered HTTP {status}"
                    + (f": {text[:200]}" if text else ", not a JSON object" if garbled else ""),
                    retryable=not refused,
                    status=status,
                )
            await self._gate_ok()
            return body

    async def search_illust(
        self,
        word: str,
        *,
        search_target: str = "partial_match_for_tags",
        sort: str = "date_desc",
        duration: str | None = None,
        start_date: str | None = None,
        end_date: str | None = None,
        offset: int = 0,
    ) -> dict[str, Any]:
        """``GET /v1/search/illust``: one page (30 works) of a tag search.

        Returns:
            The raw page ``{illusts, next_url, search_span_limit?}``.
        """
        params: dict[str, Any] = {
            "word": word,
            "search_target": search_target,
            "sort": sort,
            "filter": "for_ios",
        }
        if duration:
            params["duration"] = duration
        if start_date:
            params["start_date"] = start_date
        if end_date:
            params["end_date"] = end_date
        if offset:
            params["offset"] = offset
        return await self._get(f"{self.api_url}/v1/search/illust", params)

    async def ranking(self, mode: str = "day", date: str | None = None, offset: int = 0) -> dict[str, Any]:
        """``GET /v1/illust/ranking``: one page of a ranking."""
        params: dict[str, Any] = {"mode": mode, "filter": "for_ios"}
        if date:
            params["date"] = date
        if offset:
            params["offset"] = offset
        return await self._get(f"{self.api_url}/v1/illust/ranking", params)

    async def follow(self, next_url: str) -> dict[str, Any]:
        """Fetch the page a ``next_url`` names (its query string is re-sent as parameters)."""
        parts = urlsplit(next_url)
        params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        return await self._get(f"{self.api_url}{parts.path}", params)

    async def illust_detail(self, work_id: str) -> Work:
        """``GET /v1/illust/detail``: the work (see :meth:`illust_detail_texts`)."""
        work, _ = await self.illust_detail_texts(work_id)
        return work

    async def illust_detail_texts(self, work_id: str) -> tuple[Work, list[str] | None]:
        """``GET /v1/illust/detail``, with what a search may match the work by
        (:func:`~curaflow.sources.pixiv.client.search_texts`: None when not read).

        Returns:
            The work ``work_id`` as the detail describes it (its id checked: the answer is
            about ``work_id`` and no other).

        Raises:
            WorkUnavailable: the work is gone, private or restricted.
            SourceError: classified failure; ``remote_http_error`` (retried) for an answer
                with no illust object, an ``illust`` whose fields curaflow does not read
                (:class:`InvalidWork`), or one describing another work (a cache or a proxy
                keyed wrongly: it says nothing of ``work_id``, alive, hidden or gone —
                until 2026-12-05 another work's placeholder was taken for ``work_id``
                hidden, the end of a scan's results).
        """
        body = await self._get(f"{self.api_url}/v1/illust/detail", {"illust_id": work_id}, work_id=work_id)
        illust = body.get("illust")
        if not isinstance(illust, dict):  # an answer of another shape: the source's, retried
            raise SourceError(
                TerminalReason.REMOTE_HTTP_ERROR, "pixiv answered an illust detail without an illust object"
            )
        try:
            work = parse_work(illust, cleaned=True)  # read by _get with its strings cleaned
        except InvalidWork as err:
            # Fields curaflow does not recognise say nothing of the work (a shape never
            # seen): the source's answer, retried — never a verdict on the work.
            raise SourceError(
                TerminalReason.REMOTE_HTTP_ERROR, f"pixiv answered an illust detail curaflow does not read: {err}"
            ) from None
        if work.work_id != str(work_id):
            raise SourceError(
                TerminalReason.REMOTE_HTTP_ERROR,
                f"pixiv answered the detail of work {work.work_id} when asked for work "
                f"{work_id}: an answer about another work says nothing of this one",
            )
        return work, search_texts(illust)

    async def ugoira_metadata(self, work_id: str) -> Animation:
        """``GET /v1/ugoira/metadata``: an animated work's frames zip and frame delays.

        Raises:
            WorkUnavailable: the work is gone, private or restricted — the app-api's own 404
                in words to its user only ``corroborate`` (2026-12-07): the work's once its
                detail says it is gone too
                (:func:`~curaflow.sources.corroboration.corroborated`), as a file's 404 is —
                the search has just listed it, and the metadata of an animation not ready
                yet or a replica lagging answers so for a work alive; or the answer is the
                app-api's metadata and describes no usable animation
                (:class:`~curaflow.sources.animation.UnusableAnimation`: ``unusable_animation``,
                not recognised as the work's: held back briefly).
            SourceError: classified failure; ``metadata_failed`` (retried) when the answer
                is not the app-api's metadata object, or is another work's — its frames zip
                named for another id (:func:`~curaflow.sources.pixiv.ugoira.zip_work_id`: a
                cache keyed without ``illust_id``; until 2026-12-07 its animation was
                delivered as ``work_id``'s) —
                (:class:`~curaflow.sources.pixiv.ugoira.UnrecognisedMetadata`: never the work's).
        """
        try:
            body = await self._get(f"{self.api_url}/v1/ugoira/metadata", {"illust_id": work_id}, work_id=work_id)
        except WorkUnavailable as gone:
            if not gone.recognised:
                raise
            # Two answers of the app-api about one work (its listing alive, its metadata
            # gone): the work's detail settles it (until 2026-12-07 the metadata's 404
            # alone cost the work the week, and its target's frontier passed it for good).
            raise WorkUnavailable(work_id, f"ugoira metadata: {gone.why}", gone.kind, corroborate=True) from None
        try:
            return parse_metadata(body, work_id)
        except UnusableAnimation as err:
            # The metadata's shape, a frame without a delay, a zip URL that is none: what a
            # renamed field or a changed API would look like for every ugoira — skipped,
            # held back briefly, never the week (the brief's "missing delay").
            raise WorkUnavailable(work_id, f"ugoira: {err}", UnavailableKind.UNUSABLE_ANIMATION) from None
        except UnrecognisedMetadata as err:
            raise SourceError(TerminalReason.METADATA_FAILED, f"pixiv ugoira metadata of {work_id}: {err}") from None

    async def animation(self, work: Work) -> Animation | None:
        """An ugoira's frames zip and delays (:meth:`ugoira_metadata`); None unless
        ``work.kind == "ugoira"`` (the source's own type word).

        Raises:
            WorkUnavailable / SourceError: as :meth:`ugoira_metadata`.
        """
        if work.kind != "ugoira":
            return None
        return await self.ugoira_metadata(work.work_id)
