"""What the client presents itself as and where it may go: the public constants of Pixiv's
iOS app, the app-api's addresses and paging bounds, the marks of its error bodies, the
default outbound limits, and the app's request headers."""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime

from curaflow.outbound import Destinations, Origin, configured, data
from curaflow.outbound.destinations import IPNetwork

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
#: The token endpoint's ``error`` when it refuses the refresh token (RFC 6749 §5.2): the
#: one auth answer that is the account's (``auth_failed``); every other is the source's.
INVALID_GRANT = "invalid_grant"
#: The words that name the refresh token in the token endpoint's refusal (lower case, one
#: space: Pixiv's "Invalid refresh token"), beside :data:`INVALID_GRANT`.
REFRESH_TOKEN_WORDS = "refresh token"
RESTRICTED_MARK = "your access is currently restricted"
#: Pixiv's words that a work was deleted or never existed, the one wording of a 404 that
#: makes a work gone for the week (:func:`~curaflow.sources.pixiv.client.answers.says_gone`):
#: the app-api's ``user_message`` in Japanese — what it answers a detail of a deleted work,
#: as pixivpy's users and the downloaders built on it quote it (PixivUtil2, gallery-dl's
#: users; the replay answers it) — and Pixiv's English wordings of the same fact (its web
#: pages, its ajax API with ``lang=en``). Written here as read by
#: :func:`~curaflow.sources.pixiv.client.answers.folded_words` (NFKC, case-folded, one
#: space, no closing mark). A wording not listed — another language, Pixiv's words changed
#: — is not recognised: the work is held back briefly and the answer counted, never the
#: week (2026-12-07).
GONE_WORDS = (
    "該当作品は削除されたか、存在しない作品idです",
    "work has been deleted or the id does not exist",
    "the following work is either deleted, or the id does not exist",
)
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


#: An access token's lifetime when the auth answer's ``expires_in`` is not one curaflow can
#: use (Pixiv's is 3600 s), and the bounds of one it can (seconds).
DEFAULT_TOKEN_LIFETIME_S = 3600.0
MIN_TOKEN_LIFETIME_S = 60.0
MAX_TOKEN_LIFETIME_S = 86_400.0


def token_lifetime_s(expires_in: object) -> float:
    """How long (seconds) to keep an access token, from the auth answer's ``expires_in``.

    A positive number, or text of one, kept within :data:`MIN_TOKEN_LIFETIME_S` ..
    :data:`MAX_TOKEN_LIFETIME_S`: a lifetime of a second would refresh the token before
    every request (an auth call each, through the account's rate gate), an endless one
    never ahead of its expiry (the OAuth error then refreshes it, one retried call).
    Anything else — missing, zero or negative, NaN, a boolean, a list, text that is no
    number — is :data:`DEFAULT_TOKEN_LIFETIME_S`: an answer not understood costs nothing.
    """
    if isinstance(expires_in, bool) or not isinstance(expires_in, int | float | str):
        return DEFAULT_TOKEN_LIFETIME_S
    try:
        value = float(expires_in)
    except (ValueError, OverflowError):  # text that is no number; an integer beyond a float
        return DEFAULT_TOKEN_LIFETIME_S if isinstance(expires_in, str) else MAX_TOKEN_LIFETIME_S
    if math.isnan(value) or value <= 0:
        return DEFAULT_TOKEN_LIFETIME_S
    return min(MAX_TOKEN_LIFETIME_S, max(MIN_TOKEN_LIFETIME_S, value))


#: The longest token of an auth answer taken (characters; Pixiv's are ~43).
MAX_TOKEN_CHARS = 4096


def usable_token(value: object) -> str | None:
    """``value`` when it can be a token of Pixiv's auth answer (``access_token``,
    ``refresh_token``): text of printable ASCII without a space, 1 to
    :data:`MAX_TOKEN_CHARS` characters; else None. A token goes into a header and a form:
    anything else (null, a number, a list, text with whitespace or a control) is an answer
    not understood, never sent on (RFC 6750 §2.1: a bearer token is ``b64token``)."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_TOKEN_CHARS:
        return None
    return value if value.isascii() and value.isprintable() and " " not in value else None


def refresh_margin_s(expires_in_s: float) -> float:
    """How long before an access token's expiry it is refreshed: 5 min, or a tenth of a short lifetime."""
    return min(REFRESH_MARGIN_S, expires_in_s / 10)


def app_headers() -> dict[str, str]:
    """The iOS app's headers of every app-api and auth request, with ``X-Client-Time`` (now,
    UTC) and its ``X-Client-Hash`` (MD5 of the time and :data:`HASH_SECRET`)."""
    client_time = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")
    return {
        "User-Agent": USER_AGENT,
        "App-OS": "ios",
        "App-OS-Version": "14.6",
        "Accept-Language": "en-us",
        "X-Client-Time": client_time,
        "X-Client-Hash": hashlib.md5((client_time + HASH_SECRET).encode()).hexdigest(),
    }
