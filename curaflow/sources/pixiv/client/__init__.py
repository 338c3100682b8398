"""An async Pixiv app-api client on httpx (reference ``pixiv-and-delivery-apis.md`` §2).

The same code talks to Pixiv and to the replay server; only the base URLs differ.

* **Auth**: refresh-token grant at ``<auth_url>/auth/token`` with the public iOS app
  client id/secret and the ``X-Client-Time`` / ``X-Client-Hash`` headers. The access
  token is refreshed 5 minutes before its ``expires_in`` (3600 s) runs out (a tenth of
  the lifetime for tokens shorter than 50 min), and once when an API call answers with
  an OAuth error, a 401 or the app-api's own 400 in words never seen (calls refused the
  same token together refresh it once);
  ``invalid_grant`` in an HTTP 400 of the token endpoint, its words naming the refresh
  token, is ``auth_failed`` (non-retryable), after exactly one token request; any other answer of it (another 400,
  a page that is not Pixiv's JSON, the word under another status) is the source's
  ``remote_http_error``, retried (:func:`~curaflow.sources.pixiv.client.answers.refuses_grant`).
* **Rate gate**: every request (token, API, image) first passes the account's
  :class:`~curaflow.sources.gate.Gate`; a rate limit climbs its cooldown ladder and the
  resulting cooldown travels on the error as ``cooldown_s``.
* **Errors inside bodies**: every JSON answer is inspected for ``{"error": …}`` whatever
  its HTTP status: "Rate Limit" → ``rate_limited`` (HTTP 403 too), OAuth messages →
  refresh once (a fresh token refused again: ``remote_http_error``, retried), "Your
  access is currently restricted." (in the app-api's own error object:
  :func:`~curaflow.sources.pixiv.client.answers.says_restricted`) → for a work-level call (detail) the work is
  unavailable but not recognised as the work's (held briefly: the words are what a
  restricted account gets too; only the app-api's own 404 names the work); for a search
  or ranking it is the *account* that is restricted:
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
  ``remote_http_error``, not retried, the token endpoint's retried, one under a status that
  is no page's judged by its status; ``download_max_bytes`` for an image — a longer one
  makes the work unavailable). The API client talks only to ``api_url`` / ``auth_url``;
  images only to Pixiv's image host (:data:`PIXIV_IMAGE_HOSTS`) or the configured
  ``image_host``: an image URL naming any other host is never requested (the work is
  unavailable), and Pixiv's host is address-checked at connect time
  (:func:`image_destinations`).

One concern per module, every name imported from here:
:mod:`~curaflow.sources.pixiv.client.app_api` (:class:`PixivClient`: the access token and
the API calls), :mod:`~curaflow.sources.pixiv.client.images` (image URLs, requests and
downloads), :mod:`~curaflow.sources.pixiv.client.gated` (the account's gate around every
request), :mod:`~curaflow.sources.pixiv.client.answers` (reading an answer: its JSON, its
error, its reason), :mod:`~curaflow.sources.pixiv.client.works` (work ids, ``illust``
objects as works) and :mod:`~curaflow.sources.pixiv.client.constants` (the app's
constants, addresses, limits, headers).
"""

from __future__ import annotations

from curaflow.sources.pixiv.client.answers import OffsetRefused
from curaflow.sources.pixiv.client.app_api import PixivClient
from curaflow.sources.pixiv.client.constants import (
    CLIENT_ID,
    CLIENT_SECRET,
    DOWNLOAD_MAX_BYTES,
    DOWNLOAD_TIMEOUT_S,
    HASH_SECRET,
    LOOPBACK_HOSTS,
    MAX_OFFSET,
    OAUTH_MARKS,
    PAGE_MAX_BYTES,
    PAGE_SIZE,
    PIXIV_API_URL,
    PIXIV_AUTH_URL,
    PIXIV_IMAGE_HOSTS,
    RATE_LIMIT_MARK,
    REFRESH_MARGIN_S,
    RESTRICTED_HINT,
    RESTRICTED_MARK,
    USER_AGENT,
    MiB,
    image_destinations,
    refresh_margin_s,
    token_lifetime_s,
    usable_token,
)
from curaflow.sources.pixiv.client.images import ImageDownload
from curaflow.sources.pixiv.client.works import (
    ACCOUNT_LIMITS,
    MAX_WORK_ID,
    WORK_ID,
    WORK_LIMITS,
    InvalidWork,
    hidden_from_account,
    is_placeholder,
    is_work_id,
    iso_create_date,
    offset_of,
    parse_work,
    pixivs_placeholder,
    search_texts,
)

__all__ = [
    "ACCOUNT_LIMITS",
    "CLIENT_ID",
    "CLIENT_SECRET",
    "DOWNLOAD_MAX_BYTES",
    "DOWNLOAD_TIMEOUT_S",
    "HASH_SECRET",
    "LOOPBACK_HOSTS",
    "MAX_OFFSET",
    "MAX_WORK_ID",
    "OAUTH_MARKS",
    "PAGE_MAX_BYTES",
    "PAGE_SIZE",
    "PIXIV_API_URL",
    "PIXIV_AUTH_URL",
    "PIXIV_IMAGE_HOSTS",
    "RATE_LIMIT_MARK",
    "REFRESH_MARGIN_S",
    "RESTRICTED_HINT",
    "RESTRICTED_MARK",
    "USER_AGENT",
    "WORK_ID",
    "WORK_LIMITS",
    "ImageDownload",
    "InvalidWork",
    "MiB",
    "OffsetRefused",
    "PixivClient",
    "hidden_from_account",
    "image_destinations",
    "is_placeholder",
    "is_work_id",
    "iso_create_date",
    "offset_of",
    "parse_work",
    "pixivs_placeholder",
    "refresh_margin_s",
    "search_texts",
    "token_lifetime_s",
    "usable_token",
]
