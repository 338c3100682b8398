"""Terminal reason codes of a cell and their mapping onto Workflow Protocol v1 codes.

Every non-submitted terminal cell carries exactly one :class:`TerminalReason`. The
catalogue follows PixivFlow 3.3.0 (reference ``pixivflow-job-system.md`` §5.4) with two
curaflow additions for delivery routes that are not TelePost:

* ``delivery_rejected``: a route refused the work itself, permanently — only for an
  answer the route recognises as the work's (a page Telegram cannot process, content
  Discord refuses, a webhook receiver's 422); the original calls this
  ``telepost_rejected``, which is kept as an alias with the same protocol code. Any
  other refusal is ``route_refused`` (the route's);
* ``delivery_unknown``: a request left for a route without an idempotency key
  (Telegram, Discord) and no answer came back, so whether it landed is unknown and the
  route's ``on_ambiguous = "fail"`` policy forbids a blind re-send;
* ``execution_terminated``: an operator terminated the job's Temporal execution; the
  reconciler converges the job at once (protocol ``cancelled_by_consumer``: a deliberate
  stop, not alertable);
* ``execution_deleted``: an operator deleted the job's running Temporal execution
  (``temporal workflow delete``, the UI's "Delete"): it was terminated and removed, so
  Temporal keeps no run to say how it ended; the reconciler converges the job once no
  attempt of it still runs (protocol ``cancelled_by_consumer``, as a terminate: a
  deliberate stop, not alertable);
* ``history_limit_exceeded``: Temporal itself terminated the job's execution because its
  history passed a limit (size, 50 MB by default; event count; mutable state size) — its
  terminate's identity is Temporal's history service and its reason Temporal's own words
  (:func:`curaflow.temporal.job_runs.at_history_limit`). What is sent to a run is recorded
  in its history before any handler sees it, so signals of any name, updates and their
  inputs sent by a Temporal client can pass it in seconds; curaflow cannot refuse a
  signal. No operator terminated it: until 2026-12-07 such a job ended ``cancelled /
  execution_terminated``, "An operator terminated the job's execution". Owner
  ``operator`` (whoever can send to the namespace's runs: a job's own history stays far
  below the limits), protocol ``internal_error`` (the closed enum has no code of its own);
  retryable: a new job runs in a new execution;
* ``scan_capped``: a scan examined its account's ``max_examined`` works without finding one it
  could use while the source still had more (``exhausted: false``): neither exhaustion
  ("add tags") nor "nothing matched"; the target's scan frontier
  (:mod:`curaflow.sources.frontier`) makes the next job go on from there. Protocol code
  ``no_candidate`` (retryable: the next job may find one);
* ``source_unusable``: every work a search ruled out was unusable as the source sent it
  (a file URL curaflow may not request, a page that is no image, no file listed, an id or
  fields not of the source's shape, an answer not recognised as the work's) — or every
  one not delivered before, when the source refused at least one (an answer not
  recognised as the work's): the source's answers changed. A source failure
  (owner ``source``, protocol ``source_error``, alertable), never "no new content";
  decided from the cell's tally (:func:`curaflow.domain.verdicts.no_candidate_verdict`);
* ``route_paused``: the route refused several different works in a row with the same
  answer, so curaflow stopped sending on it for a cool-down (``delivery.route_pause_ms``,
  or until ``curaflow routes resume``): nothing was sent, no work is used up;
* ``account_restricted``: the source restricted the account's access (Pixiv: it answered
  a search of the account with "Your access is currently restricted.") — the account, not
  one work. A retry cannot lift it, so it is not retryable; the account's requests are
  paused (``pixiv.restriction_pause_ms`` for a Pixiv account) and
  an operator must look at the account. Protocol code ``auth_error`` (the closest of the
  closed enum: "the operator must act before a retry can help");
* ``configuration_mismatch``: the worker that took a step does not know the route or the
  source the job names (not configured there, or its kind not registered in that
  process) — the processes' configurations differ, as they do for a while in every
  rolling change. Retryable: each such attempt costs one attempt of the step, never the
  cell, so a retry that lands on a worker that knows it goes on (the unknown is cheap);
  the cell ends with it only when every attempt of the step met it. Owner ``curaflow``,
  protocol ``internal_error``;
* ``step_options_changed``: an operator changed a running step's options in Temporal
  (``temporal activity update-options --start-to-close-timeout 1s
  --retry-maximum-attempts 1``, the UI's "Update options") and Temporal timed the step out
  under them — a timeout curaflow never lets fire first — or gave up retrying it before the
  step's attempts under curaflow's own policy were used
  (:func:`curaflow.domain.verdicts.failures.operator_changed_options`). Owner ``operator``,
  protocol ``internal_error`` (the closed enum has no operator's code); retryable: a rerun
  runs under curaflow's own options. Until 2026-12-06 such a cell ended ``internal_error``,
  "An internal error occurred; read the worker's log", owner ``curaflow``: a bug that never
  happened;
* ``step_paused``: an operator paused the cell's step in Temporal (``temporal activity
  pause``, the UI's "Pause") and Temporal still held it paused when the job's deadline
  stopped it — the workflow asked Temporal at the deadline (:data:`workflows.job.PAUSED_STEPS`).
  Owner ``operator``, protocol ``deadline_exceeded`` (the job ``expired``); retryable.
  Until 2026-12-06 such a cell ended ``execution_timeout``, "retry with a longer
  deadline_ms or a narrower query", owner ``curaflow``: a remedy that does not help while
  the step stays paused;
* ``pinned_build_unserved``: the job's execution is pinned (Temporal Worker Versioning: a
  versioning override, ``temporal workflow update-options --versioning-override-behavior
  pinned``, or the build that started it, as curaflow's versioned workers pin every
  execution) to a build no worker of which took its workflow task: the task had waited for
  one since before the job's deadline, and the reconciler ended the job at the deadline
  (:func:`curaflow.domain.verdicts.budget_cause`). The workflow could not run, so the
  deadline was not the cause: a longer ``deadline_ms`` would not have helped. Owner
  ``operator`` (who pinned it, or retired the build before its executions drained), protocol
  ``deadline_exceeded`` (the job ``expired``, as before); retryable: a new job runs on the
  current build. Until 2026-12-07 such a cell ended ``execution_timeout``, "retry with a
  longer deadline_ms or a narrower query", owner ``curaflow``;
* ``step_ended_by_hand``: the cell's step was ended by hand from outside curaflow —
  ``temporal activity fail`` (the failure's source ``CLI``), or ``temporal activity
  complete`` with a result that is no step's (:attr:`~curaflow.domain.verdicts.StepFailure.by_hand`),
  or shaped like one but lying (the ``deliver`` after it finds the ledger holds no fetched work
  for a job still open; a job that already ended is no one's hand).
  Owner ``operator``, protocol ``internal_error``; retryable. Until 2026-12-06
  ``internal_error``, "read the worker's log", owner ``curaflow``;
* ``storage_moved``: the cell's folder in the artifact store — the job's, the target's, a
  page's file — leads out of the artifacts directory through a symbolic link (an operator
  moved it to another disk and linked it back): curaflow writes nothing outside its
  root and follows no link out of it (:class:`curaflow.paths.LinkEscape`, the disk's
  state, never the work's). Owner ``operator``, protocol ``internal_error``; not
  retryable (the fetches of an account run on the one worker that owns its queue, with
  the one store: no retry within the job moves the folder back), as ``storage_full``.
  Until 2026-12-07 a fetch into such a folder ended ``internal_error`` ("ids are
  validated at the source: a bug"), and a release of an unavailable work in one failed
  its attempt untyped.

Each reason carries its own short, actionable sentence in Chinese and English: what
happened and what to do. ``retryable`` is the truth about the reason (can a
later attempt of the same job succeed?); non-retryability is derived from it.

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
    SCAN_CAPPED = "scan_capped"
    SOURCE_UNUSABLE = "source_unusable"
    DOWNLOAD_TIMEOUT = "download_timeout"
    DOWNLOAD_FAILED = "download_failed"
    METADATA_FAILED = "metadata_failed"
    RATE_LIMITED = "rate_limited"
    AUTH_FAILED = "auth_failed"
    ACCOUNT_RESTRICTED = "account_restricted"
    REMOTE_HTTP_ERROR = "remote_http_error"
    DELIVERY_FAILED = "delivery_failed"
    DELIVERY_REJECTED = "delivery_rejected"
    TELEPOST_REJECTED = "telepost_rejected"
    TELEGRAM_FAILED = "telegram_failed"
    DELIVERY_UNKNOWN = "delivery_unknown"
    NETWORK_ERROR = "network_error"
    EXECUTION_TIMEOUT = "execution_timeout"
    CONFIGURATION_ERROR = "configuration_error"
    CONFIGURATION_MISMATCH = "configuration_mismatch"
    INTERNAL_ERROR = "internal_error"
    STEP_OPTIONS_CHANGED = "step_options_changed"
    STEP_PAUSED = "step_paused"
    STEP_ENDED_BY_HAND = "step_ended_by_hand"
    PINNED_BUILD_UNSERVED = "pinned_build_unserved"
    QUEUED_TOO_LONG = "queued_too_long"
    STALLED_NO_HEARTBEAT = "stalled_no_heartbeat"
    DELIVERY_ABANDONED = "delivery_abandoned"
    CANCELLED_BY_CONSUMER = "cancelled_by_consumer"
    EXECUTION_TERMINATED = "execution_terminated"
    EXECUTION_DELETED = "execution_deleted"
    HISTORY_LIMIT_EXCEEDED = "history_limit_exceeded"
    ROUTE_REFUSED = "route_refused"
    ROUTE_PAUSED = "route_paused"
    DELIVERY_PARTIAL = "delivery_partial"
    OVER_ROUTE_LIMIT = "over_route_limit"
    STORAGE_FULL = "storage_full"
    STORAGE_MOVED = "storage_moved"


class Owner(StrEnum):
    """Who caused a failure: attribution comes before judgement.

    * ``work``: this work can never be sent to this route (its content, or a page over
      a limit). Only then is the work refused for good on that route.
    * ``route``: the destination itself is broken or limited (unknown webhook or chat, a
      blocked bot, a request over the receiver's limit, a rate limit, no answer). The
      work is not used up; the job is alertable.
    * ``source``: the content source failed (HTTP errors, downloads, malformed answers).
    * ``account``: the source account (login, rate limit, restriction).
    * ``curaflow``: curaflow itself (its configuration, its disk, its budgets, a bug).
    * ``operator``: an operator's action in Temporal that failed a step (its options
      changed so that Temporal timed it out or retried it no more: ``step_options_changed``; paused until the
      job's deadline: ``step_paused``), or that left its execution pinned to a build no worker ran
      (``pinned_build_unserved``), or on curaflow's artifact store (a folder moved out
      of it behind a symbolic link: ``storage_moved``), or sent to its run from a Temporal
      client (signals or updates past Temporal's history limit: ``history_limit_exceeded``); a deliberate stop
      of the job (a terminate, a delete) is no failure and has no owner.
    """

    WORK = "work"
    ROUTE = "route"
    SOURCE = "source"
    ACCOUNT = "account"
    CURAFLOW = "curaflow"
    OPERATOR = "operator"


class Origin(StrEnum):
    """Where in a cell's life a reason originates (the column reference §5.4 calls "stage";
    curaflow keeps "stage" for what a cell is doing, :class:`curaflow.domain.cells.CellStage`)."""

    ACQUISITION = "acquisition"
    DOWNLOAD = "download"
    DELIVERY = "delivery"
    EXECUTION = "execution"
    CONFIGURATION = "configuration"


@dataclass(frozen=True)
class ReasonInfo:
    """Static facts about one reason code.

    Attributes:
        origin: where it arises.
        retryable: whether a later attempt of the same job could succeed (the protocol
            code's default ``retryable`` is decided by the protocol table, not this flag).
        protocol_code: the Workflow Protocol v1 ``Error.code`` it maps to.
        message_zh / message_en: the user-facing business sentence (never an internal
            error name; reference §5.4 "meaning of the user message"): the real cause and
            the real remedy, never a remedy that would cause a duplicate.
        owner: who caused a failure with this reason (:class:`Owner`); None for reasons
            that are not failures (no new work, a cancel, a terminate).
    """

    origin: Origin
    retryable: bool
    protocol_code: str
    message_zh: str
    message_en: str
    owner: Owner | None = None


R = TerminalReason
REASONS: dict[TerminalReason, ReasonInfo] = {
    R.NO_CANDIDATE: ReasonInfo(
        Origin.ACQUISITION,
        True,
        "no_candidate",
        "没有找到可以发送的新作品；如果一直如此，请检查并扩大目标的查询（换用或增加 OR 标签、更长的时间范围）。",
        "No new work that could be sent was found; if this keeps happening, check the target's query and widen it "
        "(other tags, OR tags, a longer period).",
    ),
    R.DUPLICATE_EXHAUSTED: ReasonInfo(
        Origin.ACQUISITION,
        True,
        "no_candidate",
        "找到的作品都已经投递过了；请添加标签或扩大查询范围以找到新作品。",
        "Every work found had already been delivered; add tags or widen the query to find new ones.",
    ),
    R.FILTER_EXHAUSTED: ReasonInfo(
        Origin.ACQUISITION,
        True,
        "no_candidate",
        "没有新作品通过筛选条件；请放宽目标的筛选（收藏数、AI、R-18、页数、日期）。",
        "No new work passed the filters; relax the target's filters (bookmarks, AI, R-18, pages, dates).",
    ),
    R.SCAN_CAPPED: ReasonInfo(
        Origin.ACQUISITION,
        True,
        "no_candidate",
        "本次扫描已达该账号的上限（max_examined）仍未找到新作品，但还有更多结果；"
        "下一次任务会从停下的位置继续，或调高该账号的 max_examined。",
        "This job examined the account's max_examined works without finding a new one, though more remain; the "
        "next job continues from where it stopped (or raise the account's max_examined).",
    ),
    R.SOURCE_UNUSABLE: ReasonInfo(
        Origin.ACQUISITION,
        True,
        "source_error",
        "来源返回的新作品全部无法使用（如图片地址不在其图片服务器上，或被其拒绝）：是来源的回答变了；请检查来源，以及到其图片服务器的访问设置。",
        "Every new work the source returned was unusable (e.g. image URLs off its image host, or refused by it): its "
        "answers changed, not the works; check the source and the way to its image host.",
        owner=Owner.SOURCE,
    ),
    R.DOWNLOAD_TIMEOUT: ReasonInfo(
        Origin.DOWNLOAD,
        True,
        "source_error",
        "图片下载超时；请检查到来源图片服务器的网络后重试。",
        "Downloading the image timed out; check the network to the source's image host, then retry.",
        owner=Owner.SOURCE,
    ),
    R.DOWNLOAD_FAILED: ReasonInfo(
        Origin.DOWNLOAD,
        True,
        "source_error",
        "图片下载失败或不完整；请稍后重试。",
        "Downloading the image failed or it arrived incomplete; retry later.",
        owner=Owner.SOURCE,
    ),
    R.METADATA_FAILED: ReasonInfo(
        Origin.ACQUISITION,
        True,
        "source_error",
        "获取作品信息失败；请稍后重试。",
        "Fetching the work's information from the source failed; retry later.",
        owner=Owner.SOURCE,
    ),
    R.RATE_LIMITED: ReasonInfo(
        Origin.ACQUISITION,
        True,
        "quota_exceeded",
        "来源对此账号限流，冷却结束后再试，或降低请求频率。",
        "The source is rate limiting this account; retry after the cooldown, or lower the request rate.",
        owner=Owner.ACCOUNT,
    ),
    R.AUTH_FAILED: ReasonInfo(
        Origin.ACQUISITION,
        False,
        "auth_error",
        "来源拒绝了此账号的凭据；请设置新的凭据后重试（Pixiv：新的 refresh token，curaflow pixiv login）。",
        "The source refused the account's credentials; set new ones, then retry (for a Pixiv account: a new "
        "refresh token, from curaflow pixiv login or PIXIV_REFRESH_TOKEN).",
        owner=Owner.ACCOUNT,
    ),
    R.ACCOUNT_RESTRICTED: ReasonInfo(
        Origin.ACQUISITION,
        False,
        "auth_error",
        "来源限制了此账号的访问，其请求已暂停；请检查该账号（Pixiv：登录 pixiv.net 查看通知），或让目标改用其他账号。",
        "The source restricted this account's access and its requests are paused; check the account (for a "
        "Pixiv account: sign in at pixiv.net to read the notice), or move the target to another account.",
        owner=Owner.ACCOUNT,
    ),
    R.REMOTE_HTTP_ERROR: ReasonInfo(
        Origin.ACQUISITION,
        True,
        "source_error",
        "来源服务器返回了错误；请稍后重试。",
        "The source's server answered with an error; retry later.",
        owner=Owner.SOURCE,
    ),
    R.DELIVERY_FAILED: ReasonInfo(
        Origin.DELIVERY,
        True,
        "delivery_failed",
        "投递失败；请检查该路由的接收方是否可用后重试。",
        "Delivering the work failed; check that the route's receiver is up, then retry.",
        owner=Owner.ROUTE,
    ),
    R.DELIVERY_REJECTED: ReasonInfo(
        Origin.DELIVERY,
        False,
        "delivery_rejected",
        "接收方永久拒绝了这件作品，之后不会再发给该路由；请查看日志中接收方的回复并修正路由或接收方。",
        "The receiver refused this work for good and it is not offered to that route again; read its answer "
        "in the logs and fix the route or the receiver.",
        owner=Owner.WORK,
    ),
    R.TELEPOST_REJECTED: ReasonInfo(
        Origin.DELIVERY,
        False,
        "delivery_rejected",
        "TelePost 永久拒绝了这件作品；请查看日志中的回复并修正投递配置。",
        "TelePost refused this work for good; read its answer in the logs and fix the submission settings.",
        owner=Owner.WORK,
    ),
    R.TELEGRAM_FAILED: ReasonInfo(
        Origin.DELIVERY,
        True,
        "delivery_failed",
        "Telegram 发送失败；请检查机器人和聊天是否可用后重试。",
        "Sending to Telegram failed; check the bot and the chat, then retry.",
        owner=Owner.ROUTE,
    ),
    R.DELIVERY_UNKNOWN: ReasonInfo(
        Origin.DELIVERY,
        False,
        "delivery_failed",
        "投递结果未知：请求已发出但没有收到回应，为避免重复发送不再重试；请在目标聊天中确认是否已发布。",
        "The delivery's result is unknown: the request was sent but no answer came back, so it is not sent "
        "again to avoid a duplicate post; check the chat for it.",
        owner=Owner.ROUTE,
    ),
    R.NETWORK_ERROR: ReasonInfo(
        Origin.EXECUTION,
        True,
        "source_error",
        "连接来源时网络出现问题；请检查网络后重试。",
        "A network problem interrupted the connection to the source; check the network, then retry.",
        owner=Owner.SOURCE,
    ),
    R.EXECUTION_TIMEOUT: ReasonInfo(
        Origin.EXECUTION,
        True,
        "deadline_exceeded",
        "任务超过了截止时间；请给出更长的 deadline_ms 或更窄的查询后重试。",
        "The job ran past its deadline; retry with a longer deadline_ms or a narrower query.",
        owner=Owner.CURAFLOW,
    ),
    R.CONFIGURATION_ERROR: ReasonInfo(
        Origin.CONFIGURATION,
        False,
        "internal_error",
        "配置有误（未知的账号或路由）；请修正配置后重试。",
        "The configuration is wrong (an unknown account or route); fix it, then retry.",
        owner=Owner.CURAFLOW,
    ),
    R.CONFIGURATION_MISMATCH: ReasonInfo(
        Origin.CONFIGURATION,
        True,
        "internal_error",
        "处理此步骤的 worker 不认识任务的路由或账号（各进程配置不一致，如滚动更新中）；"
        "请统一各 worker 的配置后重新运行任务。",
        "The worker that took this step does not know the job's route or account (the processes' "
        "configurations differ, as in a rolling change); give every worker the same configuration, then rerun.",
        owner=Owner.CURAFLOW,
    ),
    R.INTERNAL_ERROR: ReasonInfo(
        Origin.EXECUTION,
        False,
        "internal_error",
        "发生内部错误；请查看 worker 日志。",
        "An internal error occurred; read the worker's log.",
        owner=Owner.CURAFLOW,
    ),
    R.STEP_OPTIONS_CHANGED: ReasonInfo(
        Origin.EXECUTION,
        True,
        "internal_error",
        "运维人员在 Temporal 中修改了这一步骤的选项（更短的超时或更少的尝试），Temporal 按其结束了它，"
        "而 curaflow 本还会重试。请重新运行任务。",
        "An operator changed this step's options in Temporal (a shorter timeout or fewer attempts), and Temporal "
        "ended it under them where curaflow would have tried again. Run the job again.",
        owner=Owner.OPERATOR,
    ),
    R.STEP_PAUSED: ReasonInfo(
        Origin.EXECUTION,
        True,
        "deadline_exceeded",
        "运维人员在 Temporal 中暂停了这一步骤，到任务的截止时间它仍处于暂停状态，没有再运行；"
        "请先取消暂停，再重新运行任务。",
        "An operator paused this step in Temporal and it was still paused at the job's deadline, so it did not "
        "run again. Unpause paused steps, then run the job again.",
        owner=Owner.OPERATOR,
    ),
    R.STEP_ENDED_BY_HAND: ReasonInfo(
        Origin.EXECUTION,
        True,
        "internal_error",
        "运维人员在 Temporal 中手动结束了这一步骤（标记为失败，或以不属于该步骤的结果完成）；"
        "curaflow、来源和路由都没有出错。请重新运行任务。",
        "An operator ended this step by hand in Temporal (failed it, or completed it with a result not the "
        "step's); nothing failed in curaflow, the source or the route. Run the job again.",
        owner=Owner.OPERATOR,
    ),
    R.PINNED_BUILD_UNSERVED: ReasonInfo(
        Origin.EXECUTION,
        True,
        "deadline_exceeded",
        "任务的执行被固定（Worker Versioning）在某构建上，截止前起无该构建的 worker 接手其工作流任务。"
        "请运行该构建的 worker 或移走该执行，再重新运行任务。",
        "The job's execution is pinned (Worker Versioning) to a build none of whose workers took its workflow "
        "task, from before the deadline. Run that build's workers, or move the execution; then rerun.",
        owner=Owner.OPERATOR,
    ),
    R.QUEUED_TOO_LONG: ReasonInfo(
        Origin.EXECUTION,
        True,
        "queued_too_long",
        "任务（或其重试的步骤）在队列中等待 worker 太久；请确认有 worker 在运行并跟得上负载。",
        "The job (or a retried step of it) waited too long in its queue for a worker; check that workers are "
        "running and keeping up.",
        owner=Owner.CURAFLOW,
    ),
    R.STALLED_NO_HEARTBEAT: ReasonInfo(
        Origin.EXECUTION,
        True,
        "stalled_no_progress",
        "执行中断，长时间没有进展（worker 退出或卡住）；请检查 worker 后重试。",
        "The job stopped making progress (a worker died or hung); check the workers, then retry.",
        owner=Owner.CURAFLOW,
    ),
    R.DELIVERY_ABANDONED: ReasonInfo(
        Origin.DELIVERY,
        True,
        "delivery_abandoned",
        "投递没有完成，已放弃（重试用完，或发送它的 worker 停止后无人接手）；请检查路由的接收方和 worker 后重试。",
        "The delivery did not complete and was given up (its retries ran out, or its worker stopped and none took "
        "it over); check the route's receiver and the workers, then retry.",
        owner=Owner.ROUTE,
    ),
    R.CANCELLED_BY_CONSUMER: ReasonInfo(
        Origin.EXECUTION, False, "cancelled_by_consumer", "任务已被取消。", "The job was cancelled."
    ),
    R.EXECUTION_TERMINATED: ReasonInfo(
        Origin.EXECUTION,
        True,
        "cancelled_by_consumer",
        "运维人员在 Temporal 中终止了该任务的执行，之后没有再运行任何步骤。",
        "An operator terminated the job's execution in Temporal; no step started after that.",
    ),
    R.EXECUTION_DELETED: ReasonInfo(
        Origin.EXECUTION,
        True,
        "cancelled_by_consumer",
        "运维人员在 Temporal 中删除了该任务正在运行的执行，之后没有再开始任何步骤；已送达的投递保留，未发出的已释放。",
        "An operator deleted the job's running execution in Temporal; no step started after that. What was "
        "delivered stays delivered; what was not sent is released.",
    ),
    R.HISTORY_LIMIT_EXCEEDED: ReasonInfo(
        Origin.EXECUTION,
        True,
        "internal_error",
        "执行历史超过了 Temporal 的上限（大小或事件数），Temporal 自行终止了它，并非运维人员；"
        "通常是客户端发来的信号或更新所致，请查看其历史找出发送方。",
        "Temporal terminated the execution itself: its history passed Temporal's limit (size or events), usually "
        "from signals or updates a client sent it; no operator did. Read its history to find the sender.",
        owner=Owner.OPERATOR,
    ),
    R.ROUTE_REFUSED: ReasonInfo(
        Origin.DELIVERY,
        False,
        "delivery_failed",
        "路由拒绝了请求（目的地、权限、上限或未知的回复）；作品未被消耗，暂不再发给该路由。请查看回复并修正路由。",
        "The route refused the request (its destination, rights, limits, or an answer curaflow does not know); "
        "the work is not used up, only held back from it for a while. Read the answer and fix the route.",
        owner=Owner.ROUTE,
    ),
    R.ROUTE_PAUSED: ReasonInfo(
        Origin.DELIVERY,
        False,
        "delivery_failed",
        "路由接连以相同回复拒绝了不同作品，已暂停，未发送；没有作品被消耗。修正后运行 curaflow routes resume。",
        "The route was paused after refusing several works in a row with the same answer; nothing was sent and "
        "no work was used up. Fix the route, then run curaflow routes resume.",
        owner=Owner.ROUTE,
    ),
    R.DELIVERY_PARTIAL: ReasonInfo(
        Origin.DELIVERY,
        False,
        "delivery_failed",
        "这件作品只有一部分发到了路由，之后失败；已发出的部分保留，其余不再发送，也不会重复发送。请查看日志中接收方的回复并修正该路由。",
        "Only part of this work reached the route before it failed; what was posted stays, the rest is not "
        "sent, and nothing is posted twice. Read the receiver's answer in the logs and fix the route.",
        owner=Owner.ROUTE,
    ),
    R.OVER_ROUTE_LIMIT: ReasonInfo(
        Origin.DELIVERY,
        False,
        "delivery_rejected",
        "curaflow 没有发送这件作品：一页或整个请求超过该路由配置的大小上限，之后不再发给该路由；"
        "若接收方允许，请提高上限后清除这条拒绝。",
        "curaflow did not send this work: a page or the request is over the route's configured size limit, "
        "so it is not offered there again; if the receiver allows more, raise the limit and clear the refusal.",
        owner=Owner.WORK,
    ),
    R.STORAGE_FULL: ReasonInfo(
        Origin.DOWNLOAD,
        False,
        "internal_error",
        "作品存储所在的磁盘已满，作品无法保存；请释放该磁盘的空间（或把作品目录移到更大的磁盘）后重新运行任务。",
        "The disk of curaflow's artifact store is full, so the work could not be saved; free space on it (or "
        "move the artifacts to a larger disk), then run the job again.",
        owner=Owner.CURAFLOW,
    ),
    R.STORAGE_MOVED: ReasonInfo(
        Origin.DOWNLOAD,
        False,
        "internal_error",
        "该任务的文件夹被移出作品存储并以链接链回，curaflow 不写入作品目录之外，作品未能保存；请移回后重新运行任务。",
        "The job's folder was moved out of curaflow's artifact store and linked back, and curaflow writes "
        "nothing outside it, so the work was not saved; move it back, then run the job again.",
        owner=Owner.OPERATOR,
    ),
}

#: Reasons that make a terminal job ``expired`` rather than ``failed`` (reference §1.4).
EXPIRY_REASONS: frozenset[str] = frozenset(
    {R.QUEUED_TOO_LONG, R.STALLED_NO_HEARTBEAT, R.EXECUTION_TIMEOUT, R.STEP_PAUSED, R.PINNED_BUILD_UNSERVED}
)

#: Reasons of a cell stopped on purpose (a consumer's cancel, an operator's terminate or
#: delete of the execution): counted as cancelled, never alertable (reference §7.3, extended).
CANCEL_REASONS: frozenset[str] = frozenset({R.CANCELLED_BY_CONSUMER, R.EXECUTION_TERMINATED, R.EXECUTION_DELETED})

#: Reasons that count as "no new work" rather than a system failure.
NO_CONTENT_REASONS: frozenset[str] = frozenset(
    {R.NO_CANDIDATE, R.DUPLICATE_EXHAUSTED, R.FILTER_EXHAUSTED, R.SCAN_CAPPED}
)

#: Reasons decided from a cell's search tally (:func:`curaflow.domain.verdicts.no_candidate_verdict`):
#: the no-content reasons, and a source whose every answer was unusable (a failure of the
#: source, not "no new work"). Their message starts with the tally's sentence
#: (:func:`curaflow.domain.tally.cell_message`).
TALLY_REASONS: frozenset[str] = NO_CONTENT_REASONS | {R.SOURCE_UNUSABLE}


def is_reason(code: str | None) -> bool:
    """Whether ``code`` is a reason of the catalogue (:class:`TerminalReason`): what an
    activity raises as an ``ApplicationError`` type. Anything else (None, the class name
    Temporal gives an exception that left an activity untyped) is not."""
    return code is not None and code in TerminalReason._value2member_map_


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


#: The longest terminal reason message of a cell, in characters (reference
#: ``pixivflow-job-system.md`` §5.2: ``terminal_reason_message`` ≤ 400; the ledger's
#: ``cells.terminal_reason_message`` is ``varchar(400)``).
MAX_REASON_MESSAGE = 400


def bounded_reason_message(message: str | None) -> str | None:
    """``message`` as a cell's terminal reason message is stored: at most
    :data:`MAX_REASON_MESSAGE` characters, a longer one cut and ended with "…".

    The one bound of the kind, applied by its one writer
    (:func:`curaflow.ledger.cells.finish_cell`): a sentence that names an operator's
    name (a hold's account, a route: :func:`curaflow.domain.holds.hold_sentence`) grows
    with it; a 64-character account name made the busy account's sentence 427
    characters, and the finish's write failed on every attempt (2026-12-06). The outcome
    record's ``user_message`` keeps the whole sentence.
    """
    if message is None or len(message) <= MAX_REASON_MESSAGE:
        return message
    return message[: MAX_REASON_MESSAGE - 1].rstrip() + "…"


def user_message(code: str | None, lang: str = "en") -> str:
    """Return the user-facing sentence for a reason code in ``lang`` (``"en"`` or ``"zh"``)."""
    info = reason_info(code)
    return info.message_zh if lang == "zh" else info.message_en
