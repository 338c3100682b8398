"""Terminal reason codes of a cell and their mapping onto Workflow Protocol v1 codes.

Every non-submitted terminal cell carries exactly one :class:`TerminalReason`. The
catalogue follows PixivFlow 3.3.0 (reference ``pixivflow-job-system.md`` §5.4) with two
curaflow additions for delivery routes that are not TelePost:

* ``delivery_rejected``: a route refused the work permanently (HTTP 4xx, "chat not
  found", "bot was blocked"); the original calls this ``telepost_rejected``, which is
  kept as an alias with the same protocol code.
* ``delivery_unknown``: a request left for a route without an idempotency key
  (Telegram, Discord) and no answer came back, so whether it landed is unknown and the
  route's ``on_ambiguous = "fail"`` policy forbids a blind re-send.
* ``execution_terminated``: an operator terminated the job's Temporal execution; the
  reconciler converges the job at once (protocol ``cancelled_by_consumer``: a deliberate
  stop, not alertable).

The protocol mapping is the closed table of ``curaflow/protocol/schema/error-mapping.json``
(vendored from ``shared/protocol/v1``); ``tests/unit/test_reasons.py`` checks both agree.
This module is pure: workflows import it through the sandbox pass-through.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class TerminalReason(StrEnum):
    """Internal terminal reason code of a cell (``cells.terminal_reason_code``)."""

    NO_CANDIDATE = "no_candidate"
    DUPLICATE_EXHAUSTED = "duplicate_exhausted"
    FILTER_EXHAUSTED = "filter_exhausted"
    DOWNLOAD_TIMEOUT = "download_timeout"
    DOWNLOAD_FAILED = "download_failed"
    METADATA_FAILED = "metadata_failed"
    RATE_LIMITED = "rate_limited"
    AUTH_FAILED = "auth_failed"
    REMOTE_HTTP_ERROR = "remote_http_error"
    DELIVERY_FAILED = "delivery_failed"
    DELIVERY_REJECTED = "delivery_rejected"
    TELEPOST_REJECTED = "telepost_rejected"
    TELEGRAM_FAILED = "telegram_failed"
    DELIVERY_UNKNOWN = "delivery_unknown"
    NETWORK_ERROR = "network_error"
    EXECUTION_TIMEOUT = "execution_timeout"
    CONFIGURATION_ERROR = "configuration_error"
    INTERNAL_ERROR = "internal_error"
    QUEUED_TOO_LONG = "queued_too_long"
    STALLED_NO_HEARTBEAT = "stalled_no_heartbeat"
    DELIVERY_ABANDONED = "delivery_abandoned"
    CANCELLED_BY_CONSUMER = "cancelled_by_consumer"
    EXECUTION_TERMINATED = "execution_terminated"


class Stage(StrEnum):
    """Where in a cell's life a reason arises (reference §5.4 "stage")."""

    ACQUISITION = "acquisition"
    DOWNLOAD = "download"
    DELIVERY = "delivery"
    EXECUTION = "execution"
    CONFIGURATION = "configuration"


@dataclass(frozen=True)
class ReasonInfo:
    """Static facts about one reason code.

    Attributes:
        stage: where it arises.
        retryable: whether a later attempt of the same job could succeed (the protocol
            code's default ``retryable`` is decided by the protocol table, not this flag).
        protocol_code: the Workflow Protocol v1 ``Error.code`` it maps to.
        message_zh / message_en: the user-facing business sentence (never an internal
            error name; reference §5.4 "meaning of the user message").
    """

    stage: Stage
    retryable: bool
    protocol_code: str
    message_zh: str
    message_en: str


R = TerminalReason
REASONS: dict[TerminalReason, ReasonInfo] = {
    R.NO_CANDIDATE: ReasonInfo(
        Stage.ACQUISITION, True, "no_candidate", "没有找到合适的新作品。", "No suitable new work was found."
    ),
    R.DUPLICATE_EXHAUSTED: ReasonInfo(
        Stage.ACQUISITION,
        True,
        "no_candidate",
        "找到的作品都已经投递过了。",
        "Every work found had already been delivered.",
    ),
    R.FILTER_EXHAUSTED: ReasonInfo(
        Stage.ACQUISITION,
        True,
        "no_candidate",
        "没有新作品通过筛选条件。",
        "No new work passed the filters.",
    ),
    R.DOWNLOAD_TIMEOUT: ReasonInfo(
        Stage.DOWNLOAD, True, "source_error", "图片下载超时。", "Downloading the image timed out."
    ),
    R.DOWNLOAD_FAILED: ReasonInfo(
        Stage.DOWNLOAD, True, "source_error", "图片下载失败。", "Downloading the image failed."
    ),
    R.METADATA_FAILED: ReasonInfo(
        Stage.ACQUISITION,
        True,
        "source_error",
        "获取作品信息失败。",
        "Fetching the work's information failed.",
    ),
    R.RATE_LIMITED: ReasonInfo(
        Stage.ACQUISITION,
        True,
        "quota_exceeded",
        "Pixiv 请求被限流，请稍后再试。",
        "Pixiv is rate limiting requests; try again later.",
    ),
    R.AUTH_FAILED: ReasonInfo(
        Stage.ACQUISITION,
        False,
        "auth_error",
        "Pixiv 登录已失效，需要重新登录。",
        "The Pixiv login has expired; an operator must log in again.",
    ),
    R.REMOTE_HTTP_ERROR: ReasonInfo(
        Stage.ACQUISITION,
        True,
        "source_error",
        "Pixiv 服务器返回了错误。",
        "The Pixiv server answered with an error.",
    ),
    R.DELIVERY_FAILED: ReasonInfo(Stage.DELIVERY, True, "delivery_failed", "投递失败。", "Delivering the work failed."),
    R.DELIVERY_REJECTED: ReasonInfo(
        Stage.DELIVERY,
        False,
        "delivery_rejected",
        "接收方拒绝了这次投递。",
        "The receiver rejected the delivery.",
    ),
    R.TELEPOST_REJECTED: ReasonInfo(
        Stage.DELIVERY,
        False,
        "delivery_rejected",
        "接收方拒绝了这次投递。",
        "The receiver rejected the delivery.",
    ),
    R.TELEGRAM_FAILED: ReasonInfo(
        Stage.DELIVERY, True, "delivery_failed", "Telegram 发送失败。", "Sending to Telegram failed."
    ),
    R.DELIVERY_UNKNOWN: ReasonInfo(
        Stage.DELIVERY,
        False,
        "delivery_failed",
        "投递结果未知：请求已发出但没有收到回应，为避免重复发送不再重试。",
        "The delivery's result is unknown: the request was sent but no answer came back, "
        "so it is not sent again to avoid a duplicate post.",
    ),
    R.NETWORK_ERROR: ReasonInfo(Stage.EXECUTION, True, "source_error", "网络出现问题。", "A network problem occurred."),
    R.EXECUTION_TIMEOUT: ReasonInfo(
        Stage.EXECUTION,
        True,
        "deadline_exceeded",
        "任务超过了截止时间。",
        "The job ran past its deadline.",
    ),
    R.CONFIGURATION_ERROR: ReasonInfo(
        Stage.CONFIGURATION, False, "internal_error", "配置有误。", "The configuration is wrong."
    ),
    R.INTERNAL_ERROR: ReasonInfo(Stage.EXECUTION, False, "internal_error", "内部错误。", "An internal error occurred."),
    R.QUEUED_TOO_LONG: ReasonInfo(
        Stage.EXECUTION,
        True,
        "queued_too_long",
        "排队超时，任务一直没有开始。",
        "The job waited too long in the queue and never started.",
    ),
    R.STALLED_NO_HEARTBEAT: ReasonInfo(
        Stage.EXECUTION,
        True,
        "stalled_no_progress",
        "执行中断，长时间没有进展。",
        "The job stopped making progress for too long.",
    ),
    R.DELIVERY_ABANDONED: ReasonInfo(
        Stage.DELIVERY,
        True,
        "delivery_abandoned",
        "投递没有被处理，已放弃。",
        "The delivery was never completed and has been given up.",
    ),
    R.CANCELLED_BY_CONSUMER: ReasonInfo(
        Stage.EXECUTION, False, "cancelled_by_consumer", "任务已被取消。", "The job was cancelled."
    ),
    R.EXECUTION_TERMINATED: ReasonInfo(
        Stage.EXECUTION,
        True,
        "cancelled_by_consumer",
        "运维人员在 Temporal 中终止了该任务的执行，之后没有再运行任何步骤。",
        "An operator terminated the job's execution in Temporal; nothing ran after that.",
    ),
}

#: Reasons that make a terminal job ``expired`` rather than ``failed`` (reference §1.4).
EXPIRY_REASONS: frozenset[str] = frozenset({R.QUEUED_TOO_LONG, R.STALLED_NO_HEARTBEAT, R.EXECUTION_TIMEOUT})

#: Reasons of a cell stopped on purpose (a consumer's cancel, an operator's terminate):
#: counted as cancelled, never alertable (reference §7.3, extended).
CANCEL_REASONS: frozenset[str] = frozenset({R.CANCELLED_BY_CONSUMER, R.EXECUTION_TERMINATED})

#: Reasons that count as "no new work" rather than a system failure.
NO_CONTENT_REASONS: frozenset[str] = frozenset({R.NO_CANDIDATE, R.DUPLICATE_EXHAUSTED, R.FILTER_EXHAUSTED})


def parse_reason(code: str | None) -> TerminalReason:
    """Return the :class:`TerminalReason` for ``code``; unknown or missing → ``internal_error``.

    Args:
        code: an internal reason code as stored in the ledger or carried as an
            ``ApplicationError.type``.
    """
    if code is None:
        return R.INTERNAL_ERROR
    try:
        return TerminalReason(code)
    except ValueError:
        return R.INTERNAL_ERROR


def reason_info(code: str | None) -> ReasonInfo:
    """Return the :class:`ReasonInfo` of ``code`` (unknown codes get ``internal_error``'s)."""
    return REASONS[parse_reason(code)]


def protocol_code_for(code: str | None) -> str:
    """Map an internal reason code onto the closed protocol enum (reference §2.3).

    Missing or unknown codes map to ``internal_error``.
    """
    return reason_info(code).protocol_code


def user_message(code: str | None, lang: str = "en") -> str:
    """Return the user-facing sentence for a reason code in ``lang`` (``"en"`` or ``"zh"``)."""
    info = reason_info(code)
    return info.message_zh if lang == "zh" else info.message_en


def no_candidate_reason(examined: int, reasons: dict[str, int]) -> TerminalReason:
    """Classify a scan that bound no work (reference §5.4 "no_candidate outcome").

    Args:
        examined: works examined by the scan.
        reasons: rejection counts by reason word (``duplicate``, ``unavailable``,
            ``excluded``, ``filtered:*``).

    Returns:
        ``duplicate_exhausted`` when every rejection was a duplicate; ``filter_exhausted``
        when at least half were duplicates or every one was a hard work-level verdict
        (no ``unavailable`` skips); otherwise ``no_candidate`` (including an empty pool).
    """
    total = sum(reasons.values())
    if examined == 0 or total == 0:
        return R.NO_CANDIDATE
    duplicates = reasons.get("duplicate", 0)
    if duplicates == total:
        return R.DUPLICATE_EXHAUSTED
    if duplicates * 2 >= total or reasons.get("unavailable", 0) == 0:
        return R.FILTER_EXHAUSTED
    return R.NO_CANDIDATE
