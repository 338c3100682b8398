"""The outbound layer: every exchange with a third party goes through it.

The source's API and auth, the image host, the webhook / Telegram / Discord routes and
the consumers' callbacks each get an :class:`~curaflow.outbound.client.Outbound` (built
by the worker, :mod:`activities.deps`). Per exchange it enforces a total time limit
(never past the job's deadline), a byte limit on what is read, and the destination
guard (origin allow-list, connect-time address check, no redirects), and decodes a
``Content-Encoding`` itself within those bytes. The policy and its owner: DESIGN "The
outbound layer"; the rules are in :mod:`.client`, :mod:`.decoding`, :mod:`.destinations`
and :mod:`.transport`.
"""

from curaflow.outbound.client import (
    ANSWER_KEEP_BYTES,
    ROUTE_ANSWER_KEEP_BYTES,
    InFlight,
    Limits,
    Outbound,
    announced_length,
    answer_head,
    as_outbound,
    attempt_deadline,
    in_flight,
    is_truncated,
    iter_capped,
    past_deadline,
    time_left,
)
from curaflow.outbound.destinations import (
    MAX_URL_CHARS,
    Destinations,
    Origin,
    configured,
    data,
    parse_networks,
    parse_origin,
    url_problem,
)
from curaflow.outbound.errors import (
    AddressRefused,
    AnswerTooLarge,
    DestinationRefused,
    RequestNotWhole,
    TimeLimitAfterSending,
    TimeLimitBeforeSending,
    TimeLimitExceeded,
    UnsupportedContentEncoding,
)

__all__ = [
    "ANSWER_KEEP_BYTES",
    "MAX_URL_CHARS",
    "ROUTE_ANSWER_KEEP_BYTES",
    "AddressRefused",
    "AnswerTooLarge",
    "DestinationRefused",
    "Destinations",
    "InFlight",
    "Limits",
    "Origin",
    "Outbound",
    "RequestNotWhole",
    "TimeLimitAfterSending",
    "TimeLimitBeforeSending",
    "TimeLimitExceeded",
    "UnsupportedContentEncoding",
    "announced_length",
    "answer_head",
    "as_outbound",
    "attempt_deadline",
    "configured",
    "data",
    "in_flight",
    "is_truncated",
    "iter_capped",
    "parse_networks",
    "parse_origin",
    "past_deadline",
    "time_left",
    "url_problem",
]
