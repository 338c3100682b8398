"""An async Pixiv app-api client on httpx (reference ``pixiv-and-delivery-apis.md`` §2).

The same code talks to Pixiv and to the replay server; only the base URLs differ.

* **Auth**: refresh-token grant at ``<auth_url>/auth/token`` with the public iOS app
  client id/secret and the ``X-Client-Time`` / ``X-Client-Hash`` headers. The access
  token is refreshed 5 minutes before its ``expires_in`` (3600 s) runs out (a tenth of
  the lifetime for tokens shorter than 50 min), and once when an API call answers with
  an OAuth error; HTTP 400 ``invalid_grant`` at the token endpoint is ``auth_failed``
  (non-retryable), after exactly one token request.
* **Rate gate**: every request (token, API, image) first passes the account's
  :class:`~curaflow.sources.gate.Gate`; a rate limit climbs its cooldown ladder and the
  resulting cooldown travels on the error as ``cooldown_s``.
* **Errors inside bodies**: every JSON answer is inspected for ``{"error": …}`` whatever
  its HTTP status: "Rate Limit" → ``rate_limited`` (HTTP 403 too), OAuth messages →
  refresh, "Your access is currently restricted." → for a work-level call (detail) the
  work is unavailable; for a search or ranking it is the *account* that is restricted:
  ``account_restricted`` (not retryable) and the account's gate is paused
  (``pixiv.restriction_pause_ms``), so no job of the account asks again meanwhile.
* **Untrusted answers**: every string of every JSON answer is cleaned
  (:func:`~curaflow.domain.text.clean_json`: no NUL, lone surrogate or control
  character); a work whose id is not Pixiv's shape (:func:`is_work_id`) or whose fields
  do not parse is :class:`InvalidWork` and never used.
* **Paging** by ``next_url``.
* **Outbound** (:mod:`curaflow.outbound`): every request has a total time limit
  (``request_timeout_s`` for the API and auth, ``download_timeout_s`` for one image) and
  a byte limit (``page_max_bytes`` for an API answer — a longer one is
  ``remote_http_error``, not retried; ``download_max_bytes`` for an image — a longer one
  makes the work unavailable). The API client talks only to ``api_url`` / ``auth_url``;
  images only to Pixiv's image host (:data:`PIXIV_IMAGE_HOSTS`) or the configured
  ``image_host``: an image URL naming any other host is never requested (the work is
  unavailable), and Pixiv's host is address-checked at connect time
  (:func:`image_destinations`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from curaflow.domain.models import Work, WorkPage
from curaflow.domain.ratelimit import parse_retry_after
from curaflow.domain.reasons import TerminalReason
from curaflow.domain.text import clean_optional, clean_text, loads_clean
from curaflow.outbound import (
    AnswerTooLarge,
    DestinationRefused,
    Destinations,
    Limits,
    Origin,
    Outbound,
    as_outbound,
    configured,
    data,
    iter_capped,
    url_problem,
)
from curaflow.outbound.destinations import IPNetwork
from curaflow.sources.animation import Animation, UnusableAnimation
from curaflow.sources.errors import SourceError, UnavailableKind, WorkUnavailable
from curaflow.sources.gate import Gate
from curaflow.sources.pixiv.ugoira import UnrecognisedMetadata, parse_metadata

#: What to do about a restricted account (logged with ``source.account_restricted``).
RESTRICTED_HINT = (
    "Pixiv answered 'Your access is currently restricted.': the account's requests are paused "
    "(pixiv.restriction_pause_ms). Sign in at pixiv.net with this account to read the notice, or move "
    "the target to another account; lift the pause with `curaflow accounts resume ACCOUNT`."
)

# Public constants of Pixiv's iOS app, shipped by every client library (pixivpy, gallery-dl).
CLIENT_ID = "MOBrBDS8blbauoSck0ZfDbtuzpyT"
CLIENT_SECRET = "lsACyCD94FhDUtGTXi3QzcFE2uU1hqtDaKeqrdwj"
HASH_SECRET = "28c1fdd170a5204386cb1313c7077b34f83e4aaf4aa829ce78c231e05b0bae2c"
USER_AGENT = "PixivIOSApp/7.13.3 (iOS 14.6; iPhone13,2)"
PIXIV_API_URL = "https://app-api.pixiv.net"
PIXIV_AUTH_URL = "https://oauth.secure.pixiv.net"
#: Pixiv's image host: the URLs a bound work stores, in real and in replay mode.
PIXIV_IMAGE_HOSTS = ("i.pximg.net",)
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
REFRESH_MARGIN_S = 300
PAGE_SIZE = 30
MAX_OFFSET = 5000

RATE_LIMIT_MARK = "rate limit"
RESTRICTED_MARK = "your access is currently restricted"
OAUTH_MARKS = ("oauth", "access token", "invalid_grant")
MiB = 1024 * 1024
#: Defaults of the outbound limits (``outbound.*`` settings).
PAGE_MAX_BYTES = 4 * MiB
DOWNLOAD_MAX_BYTES = 64 * MiB
DOWNLOAD_TIMEOUT_S = 120.0


def image_destinations(image_host: str | None, private_networks: tuple[IPNetwork, ...] = ()) -> Destinations:
    """Where image requests may go: the configured ``image_host`` (the operator's), else
    Pixiv's image host on its default port, its resolved address checked at connect time."""
    if image_host:
        return configured(image_host)
    return data(tuple(Origin(host, 443) for host in PIXIV_IMAGE_HOSTS), private_networks)


def refresh_margin_s(expires_in_s: float) -> float:
    """How long before an access token's expiry it is refreshed: 5 min, or a tenth of a short lifetime."""
    return min(REFRESH_MARGIN_S, expires_in_s / 10)


#: A Pixiv work id: a positive decimal integer without leading zeros that fits a bigint.
WORK_ID = re.compile(r"[1-9][0-9]{0,18}")
MAX_WORK_ID = 2**63 - 1


def is_work_id(value: str) -> bool:
    """True when ``value`` has the shape of a Pixiv work id (``126872003``).

    ASCII digits only, no sign, no leading zero, at most 2**63 - 1. Anything else (a path
    such as ``../../x`` or ``/tmp/x``, whitespace, full-width digits) is refused: the id
    becomes part of file names, idempotency keys and URLs.
    """
    return bool(WORK_ID.fullmatch(value)) and int(value) <= MAX_WORK_ID


class InvalidWork(ValueError):
    """An ``illust`` object that cannot be used: an id not of Pixiv's shape, or broken fields.

    Attributes:
        raw_id: the id as the source sent it (cleaned, at most 64 characters), for logs.
    """

    def __init__(self, raw_id: Any, why: str) -> None:
        self.raw_id = clean_text(str(raw_id))[:64]
        super().__init__(f"invalid work {self.raw_id!r}: {why}")


def parse_work(illust: dict[str, Any]) -> Work:
    """Convert one app-api ``illust`` object into a :class:`~curaflow.domain.models.Work`.

    Multi-page works list every page from ``meta_pages``; single-page works use
    ``meta_single_page.original_image_url``. Text fields are cleaned
    (:func:`~curaflow.domain.text.clean_text`).

    Raises:
        InvalidWork: the id is not of Pixiv's shape (:func:`is_work_id`), or a field does
            not have its type; such a work is never used.
    """
    raw_id = illust.get("id") if isinstance(illust, dict) else None
    work_id = str(raw_id) if isinstance(raw_id, int | str) and not isinstance(raw_id, bool) else ""
    if not is_work_id(work_id):
        raise InvalidWork(raw_id, "the id is not a Pixiv work id")
    try:
        return _parse_work(illust, work_id)
    except (TypeError, ValueError, KeyError, AttributeError) as err:
        raise InvalidWork(raw_id, f"{type(err).__name__} in its fields") from None


def _parse_work(illust: dict[str, Any], work_id: str) -> Work:
    pages: list[WorkPage] = []
    page_count = int(illust.get("page_count") or 1)
    if page_count > 1 and illust.get("meta_pages"):
        for i, page in enumerate(illust["meta_pages"]):
            urls = page.get("image_urls") or {}
            url = urls.get("original") or urls.get("large") or ""
            pages.append(WorkPage(index=i, url=url))
    else:
        url = (illust.get("meta_single_page") or {}).get("original_image_url") or (
            (illust.get("image_urls") or {}).get("large") or ""
        )
        pages.append(WorkPage(index=0, url=url, width=illust.get("width"), height=illust.get("height")))
    if pages and pages[0].width is None:
        pages[0].width = illust.get("width")
        pages[0].height = illust.get("height")
    for page in pages:
        page.url = clean_text(str(page.url))
    user = illust.get("user") or {}
    author = user.get("name")
    create_date = illust.get("create_date")
    return Work(
        work_id=work_id,
        work_type="illustration",
        kind=clean_text(str(illust.get("type") or "illust")),
        title=clean_text(str(illust.get("title") or "")),
        url=f"https://www.pixiv.net/artworks/{work_id}",
        tags=[clean_text(str(t["name"])) for t in illust.get("tags") or [] if t.get("name")],
        create_date=clean_optional(str(create_date)) if create_date is not None else None,
        page_count=page_count,
        width=illust.get("width"),
        height=illust.get("height"),
        x_restrict=int(illust.get("x_restrict") or 0),
        ai_type=int(illust.get("illust_ai_type") or 0),
        total_bookmarks=int(illust.get("total_bookmarks") or 0),
        visible=bool(illust.get("visible", True)),
        author=clean_text(str(author)) if author is not None else None,
        pages=pages,
    )


def is_placeholder(work: Work) -> bool:
    """True for a restricted placeholder (``visible: false`` or a limit_* image)."""
    if not work.visible:
        return True
    return any("limit_" in p.url.rsplit("/", 1)[-1] for p in work.pages)


def _error_text(body: Any) -> str | None:
    if not isinstance(body, dict) or "error" not in body or not body["error"]:
        return None
    err = body["error"]
    if isinstance(err, str):
        return err
    if isinstance(err, dict):
        parts = [str(err.get(k) or "") for k in ("message", "user_message", "reason")]
        return " ".join(p for p in parts if p) or "error"
    return str(err)


class PixivClient:
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
    ) -> None:
        self._clock = clock
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

    def _app_headers(self) -> dict[str, str]:
        client_time = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")
        return {
            "User-Agent": USER_AGENT,
            "App-OS": "ios",
            "App-OS-Version": "14.6",
            "Accept-Language": "en-us",
            "X-Client-Time": client_time,
            "X-Client-Hash": hashlib.md5((client_time + HASH_SECRET).encode()).hexdigest(),
        }

    async def authenticate(self, *, force: bool = False) -> str:
        """Return a valid access token, refreshing it when missing, near expiry or forced.

        Raises:
            SourceError: ``auth_failed`` (non-retryable) on HTTP 400 ``invalid_grant``;
                ``network_error`` / ``remote_http_error`` (retryable) otherwise.
        """
        async with self._auth_lock:
            if not force and self._access_token and self._clock() < self._expires_at - self._margin_s:
                return self._access_token
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
                        "refresh_token": self._refresh_token,
                        "get_secure_url": "1",
                        "include_policy": "true",
                    },
                    headers=self._app_headers(),
                )
            except AnswerTooLarge as err:
                raise self._too_large(err) from err
            except httpx.HTTPError as err:
                raise SourceError(TerminalReason.NETWORK_ERROR, f"pixiv auth: {type(err).__name__}") from err
            body = self._json(response)
            await self._check_rate_limit(response, body)
            if response.status_code == 400 or (isinstance(body, dict) and body.get("error") == "invalid_grant"):
                raise SourceError(
                    TerminalReason.AUTH_FAILED,
                    "pixiv refresh token rejected (invalid_grant)",
                    retryable=False,
                    status=response.status_code,
                )
            if response.status_code >= 400 or not isinstance(body, dict) or "access_token" not in body:
                reason = self._reason_for_status(response.status_code, body)
                raise SourceError(
                    reason, f"pixiv auth answered HTTP {response.status_code}", status=response.status_code
                )
            await self._gate_ok()
            self._access_token = str(body["access_token"])
            lifetime = float(body.get("expires_in") or 3600)
            self._margin_s = refresh_margin_s(lifetime)
            self._expires_at = self._clock() + lifetime
            if body.get("refresh_token"):
                self._refresh_token = str(body["refresh_token"])
            return self._access_token

    def expire_access_token(self) -> None:
        """Forget the access token's lifetime so the next call refreshes it (tests, ops)."""
        self._expires_at = 0.0

    # ---- gate ---------------------------------------------------------------------

    async def _pass_gate(self) -> None:
        if self._gate is not None:
            await self._gate.acquire()

    async def _gate_ok(self) -> None:
        if self._gate is not None:
            await self._gate.succeeded()

    async def _check_rate_limit(self, response: httpx.Response, body: Any) -> None:
        """Raise ``rate_limited`` (after climbing the gate's ladder) for a rate-limit answer.

        Pixiv reports rate limits in the body (``{"error": {"message": "Rate Limit"}}``),
        often with HTTP 403, sometimes as HTTP 429: classify by body, then status.
        """
        text = (_error_text(body) or "").lower()
        if RATE_LIMIT_MARK not in text and response.status_code != 429:
            return
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        cooldown = await self._gate.rate_limited(retry_after) if self._gate is not None else None
        raise SourceError(
            TerminalReason.RATE_LIMITED,
            f"pixiv rate limit (HTTP {response.status_code})",
            retry_after_s=retry_after,
            cooldown_s=cooldown,
            status=response.status_code,
        )

    # ---- requests -----------------------------------------------------------------

    @staticmethod
    def _json(response: httpx.Response) -> Any:
        """The answer's JSON with every string cleaned (:func:`clean_json`); None if not JSON."""
        try:
            return loads_clean(response.text)
        except ValueError:
            return None

    @staticmethod
    def _too_large(err: AnswerTooLarge) -> SourceError:
        # The same request gets the same answer: retrying only costs the account's gate.
        return SourceError(
            TerminalReason.REMOTE_HTTP_ERROR,
            f"pixiv answered more than {err.limit} bytes (outbound.page_max_bytes); the answer was dropped",
            retryable=False,
        )

    @staticmethod
    def _reason_for_status(status: int, body: Any) -> TerminalReason:
        text = (_error_text(body) or "").lower()
        if status == 429 or RATE_LIMIT_MARK in text:
            return TerminalReason.RATE_LIMITED
        if status >= 500:
            return TerminalReason.REMOTE_HTTP_ERROR
        return TerminalReason.REMOTE_HTTP_ERROR

    async def _get(
        self, url: str, params: dict[str, Any] | None = None, *, work_id: str | None = None
    ) -> dict[str, Any]:
        """GET an app-api URL with auth, error-body detection and one refresh on OAuth errors.

        Raises:
            SourceError: classified failure.
            WorkUnavailable: a work-level refusal (404, restricted) when ``work_id`` is given.
        """
        refreshed = False
        while True:
            token = await self.authenticate()
            await self._pass_gate()
            headers = {**self._app_headers(), "Authorization": f"Bearer {token}"}
            try:
                response = await self._out.request("GET", url, params=params, headers=headers, limits=self._api_limits)
            except AnswerTooLarge as err:
                raise self._too_large(err) from err
            except httpx.TimeoutException as err:
                raise SourceError(TerminalReason.NETWORK_ERROR, f"pixiv timeout: {type(err).__name__}") from err
            except httpx.HTTPError as err:
                raise SourceError(TerminalReason.NETWORK_ERROR, f"pixiv network: {type(err).__name__}") from err
            body = self._json(response)
            text = _error_text(body)
            lowered = (text or "").lower()
            await self._check_rate_limit(response, body)
            if text is not None and any(m in lowered for m in OAUTH_MARKS):
                if refreshed:
                    raise SourceError(
                        TerminalReason.AUTH_FAILED, "pixiv rejected a fresh access token", retryable=False
                    )
                refreshed = True
                await self.authenticate(force=True)
                continue
            if work_id is not None and (response.status_code in (403, 404) or RESTRICTED_MARK in lowered):
                raise WorkUnavailable(work_id, text or f"HTTP {response.status_code}")
            if RESTRICTED_MARK in lowered:
                # Not one work: the account. Retrying cannot lift it; pause the account.
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
            if response.status_code >= 400 or text is not None or not isinstance(body, dict):
                status = response.status_code
                # A 2xx that is not the app-api's JSON object (not JSON, nested too deep
                # to parse) is the source's glitch, retried like a 5xx; a 4xx is final.
                garbled = status < 400 and text is None
                raise SourceError(
                    self._reason_for_status(status, body),
                    f"pixiv answered HTTP {status}"
                    + (f": {text[:200]}" if text else ", not a JSON object" if garbled else ""),
                    retryable=status >= 500 or status == 429 or garbled,
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
        """``GET /v1/illust/detail``.

        Raises:
            WorkUnavailable: the work is gone, private or restricted.
            SourceError: classified failure.
        """
        body = await self._get(f"{self.api_url}/v1/illust/detail", {"illust_id": work_id}, work_id=work_id)
        return parse_work(body["illust"])

    async def ugoira_metadata(self, work_id: str) -> Animation:
        """``GET /v1/ugoira/metadata``: an animated work's frames zip and frame delays.

        Raises:
            WorkUnavailable: the work is gone, private or restricted; or the answer is the
                app-api's metadata and describes no usable animation
                (:class:`~curaflow.sources.animation.UnusableAnimation`: ``unusable_animation``).
            SourceError: classified failure; ``metadata_failed`` (retried) when the answer
                is not the app-api's metadata object
                (:class:`~curaflow.sources.pixiv.ugoira.UnrecognisedMetadata`: never the work's).
        """
        body = await self._get(f"{self.api_url}/v1/ugoira/metadata", {"illust_id": work_id}, work_id=work_id)
        try:
            return parse_metadata(body)
        except UnusableAnimation as err:
            raise WorkUnavailable(work_id, f"ugoira: {err}", UnavailableKind.UNUSABLE_ANIMATION) from None
        except UnrecognisedMetadata as err:
            raise SourceError(TerminalReason.METADATA_FAILED, f"pixiv ugoira metadata of {work_id}: {err}") from None

    def image_url(self, url: str) -> str:
        """Where to GET the image ``url`` of a work: itself, or its copy on ``image_host``.

        With ``image_host`` set, ``https://i.pximg.net/<path>`` becomes
        ``<image_host>/<path>``, and so does a loopback replay URL
        ``http://127.0.0.1:<port>/i/<path>`` (stored by versions before canonical URLs):
        never the port of whichever process bound the work.

        The path stays strictly under the image host (and under ``image_host``'s own
        path): a URL that is not one a request can be made for
        (:func:`~curaflow.outbound.url_problem`: too long, whitespace or unprintable
        characters, not a URL, a dot-segment — raw, percent-encoded, behind a backslash),
        or whose path is not absolute or has an empty segment, is refused.

        Raises:
            DestinationRefused: the URL names a host other than Pixiv's image host (a
                work's URLs are the source's data: only its image host may be fetched),
                or is not a usable URL (above).
        """
        problem = url_problem(url)
        if problem is not None:
            raise DestinationRefused(f"image URL refused: {problem}")
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        query = f"?{parts.query}" if parts.query else ""
        path = parts.path
        if not path.startswith("/") or "//" in path or parts.fragment:
            raise DestinationRefused("image URL refused: its path is not a plain absolute path")
        if host in PIXIV_IMAGE_HOSTS and parts.scheme == "https" and parts.port in (None, 443):
            return url if self.image_host is None else f"{self.image_host}{path}{query}"
        if self.image_host is not None and host in LOOPBACK_HOSTS and path.startswith("/i/"):
            return f"{self.image_host}{path[2:]}{query}"
        raise DestinationRefused(f"image URL host {host!r} is not the source's image host")

    def image_request(self, url: str) -> httpx.Request:
        """Build a GET for an image URL with the app's ``Referer`` (mapped by :meth:`image_url`).

        Raises:
            DestinationRefused: as :meth:`image_url`, or a URL httpx cannot build a request for.
        """
        try:
            return self._images.build_request(
                "GET",
                self.image_url(url),
                headers={"Referer": self.image_referer, "User-Agent": USER_AGENT, "Accept-Encoding": "identity"},
            )
        except (httpx.InvalidURL, ValueError) as err:
            raise DestinationRefused(f"image URL refused: {type(err).__name__}") from None

    @contextlib.asynccontextmanager
    async def open_image(self, url: str) -> AsyncIterator[httpx.Response]:
        """Open a streaming GET of an image; the ``async with`` block reads the body
        (:meth:`image_chunks`) under the download's total time limit.

        Raises:
            SourceError: ``download_failed`` / ``download_timeout`` (also when the time
                runs out inside the block); rate limits as ``rate_limited``. Any other
                answer (another 4xx, a 5xx) is the host's, retried.
            WorkUnavailable: HTTP 403/404/410 for the image (``gone``); an image URL the
                client may not request (:meth:`image_url`), an address the guard refuses,
                or HTTP 414 URI Too Long (``unusable_url``); a body over
                ``download_max_bytes`` (``too_large``).
        """
        work_id = url.rsplit("/", 1)[-1].split("_", 1)[0][:64] if isinstance(url, str) else "?"
        try:
            request = self.image_request(url)
        except DestinationRefused as err:
            raise WorkUnavailable(work_id, str(err), UnavailableKind.UNUSABLE_URL) from None
        await self._pass_gate()
        try:
            async with self._images.stream(request, self._image_limits) as response:
                if response.status_code == 429:
                    await self._check_rate_limit(response, None)
                if response.status_code in (403, 404, 410):
                    raise WorkUnavailable(work_id, f"image HTTP {response.status_code}")
                if response.status_code == 414:  # the URL, the work's data, is what the host refused
                    raise WorkUnavailable(work_id, "image HTTP 414 (URI too long)", UnavailableKind.UNUSABLE_URL)
                if response.status_code >= 400:
                    raise SourceError(
                        TerminalReason.DOWNLOAD_FAILED,
                        f"image HTTP {response.status_code}",
                        status=response.status_code,
                    )
                if not 200 <= response.status_code < 300:
                    raise WorkUnavailable(work_id, f"image HTTP {response.status_code} (redirects are not followed)")
                await self._gate_ok()
                yield response
        except DestinationRefused as err:
            raise WorkUnavailable(work_id, f"image host refused: {err}", UnavailableKind.UNUSABLE_URL) from None
        except AnswerTooLarge as err:
            raise WorkUnavailable(
                work_id,
                f"an image page is larger than {err.limit} bytes (outbound.download_max_bytes)",
                UnavailableKind.TOO_LARGE,
            ) from None
        except httpx.TimeoutException as err:
            raise SourceError(TerminalReason.DOWNLOAD_TIMEOUT, f"image timeout: {err}") from err
        except httpx.HTTPError as err:
            raise SourceError(TerminalReason.DOWNLOAD_FAILED, f"image request: {type(err).__name__}") from err

    def image_chunks(self, response: httpx.Response) -> AsyncIterator[bytes]:
        """The body of an image opened by :meth:`open_image`, within ``download_max_bytes``."""
        return iter_capped(response, self._image_limits.max_bytes)

    # ---- the Source protocol's download half (curaflow.sources.base) -------------

    @contextlib.asynccontextmanager
    async def download(self, url: str) -> AsyncIterator[ImageDownload]:
        """:meth:`open_image` as a :class:`~curaflow.sources.base.Download`: the announced
        length (``Content-Length`` when it is a number) and the body's chunks.

        Raises:
            SourceError / WorkUnavailable: as :meth:`open_image`.
        """
        async with self.open_image(url) as response:
            yield ImageDownload(self, response)

    async def animation(self, work: Work) -> Animation | None:
        """An ugoira's frames zip and delays (:meth:`ugoira_metadata`); None unless
        ``work.kind == "ugoira"`` (the source's own type word).

        Raises:
            WorkUnavailable / SourceError: as :meth:`ugoira_metadata`.
        """
        if work.kind != "ugoira":
            return None
        return await self.ugoira_metadata(work.work_id)


class ImageDownload:
    """One image being downloaded by :meth:`PixivClient.download`.

    Attributes:
        expected_bytes: ``Content-Length`` when the image host sent a number, else None.
    """

    def __init__(self, client: PixivClient, response: httpx.Response) -> None:
        self._client = client
        self._response = response
        length = response.headers.get("content-length")
        self.expected_bytes = int(length) if length is not None and length.isdigit() else None

    def chunks(self) -> AsyncIterator[bytes]:
        """The body within ``download_max_bytes`` (:meth:`PixivClient.image_chunks`)."""
        return self._client.image_chunks(self._response)


def offset_of(next_url: str | None) -> int:
    """The ``offset`` query parameter of a ``next_url`` (0 when absent)."""
    if not next_url:
        return 0
    values = parse_qs(urlsplit(next_url).query).get("offset")
    try:
        return int(values[-1]) if values else 0
    except ValueError:
        return 0
