"""The ``deliver`` activity: deliver the cell's artifact on one route, exactly once.

One activity per route, each with its own retry budget (the activity's retry policy).
An attempt:

0. finds the artifact: on this process's disk when it fetched it (or shares its
   volume), else the ledger's copy is written into a folder of this attempt
   (:mod:`curaflow.ledger.artifacts`; removed when the attempt ends), so a deliver
   attempt runs on any worker process — no disk is shared;
1. claims the send in the ledger under the job row lock (intent ``sending``,
   committed before anything leaves). A confirmed intent returns at once; a consumer
   cancel recorded before the claim means the request is never sent; an intent left
   ``sending`` by a dead attempt is ambiguous — re-sent only on routes where that is
   safe (stable idempotency key, or ``on_ambiguous = "retry"``), otherwise the cell
   fails ``delivery_unknown`` and nothing is re-sent;
2. sends, through the route's outbound client: every request ends by the route's total
   time limit and by the job's deadline. A cancel (the consumer's, or the deadline's)
   that reaches the attempt while a request is out gives it :data:`CANCEL_GRACE_S` to
   answer, and what the route answered is recorded: a delivery that landed before the
   cancel reached it leaves the cell ``submitted`` (no phantom deliveries, no lies); a
   send still out then is cut and recorded as possibly delivered (``unknown``). When the
   execution itself is gone (an operator's terminate, a timeout, a reset: the heartbeat
   answers "not found"), the send is not cut: it ends by its own limits and records
   what the route answered, before the reconciler closes the job;
3. records the answer: confirmed → intent ``delivered`` / ``duplicate``, the cell
   ``submitted`` once every route confirmed; permanent failure → cell ``failed``;
   retryable failure → intent back to ``reserved`` and an ``ApplicationError`` for
   Temporal to retry; on the last allowed attempt the cell ends ``delivery_abandoned``.

The verdict is judged from the failure's owner (:mod:`curaflow.domain.verdicts`): only a
failure owned by the work (``delivery_rejected``, ``over_route_limit``) has the refusal
remembered per (route, work) in the same transaction (:mod:`curaflow.ledger.remembered`),
so later jobs pick another work for that route; a route-owned one
(``route_refused``, a rate limit, no answer) leaves the work free for a later job — a
route's refusal of the request holds the work back from that route for a while, so the
next job tries another first. A
final failure after part of the work was posted (albums or messages confirmed) ends the
intent ``unknown`` — reported ``partial`` — so nothing of it is ever posted again.

The route's gate (:mod:`curaflow.ledger.route_gates`, the one owner of "is this route
broken") sees every refusal the receiver answered: several different works refused in a
row with the same answer pause the route and lift those refusals; a paused route sends
nothing (the cell ends ``route_paused`` at once); a rate limit waits the delay the
receiver stated or the backoff of one that stated none, and a global or IP-level limit
makes every send of the route wait (``cooling``).

One concern per module, every name imported from here: :mod:`~activities.deliver.activity`
(:class:`DeliverActivity`: the step, the artifact, the claim, the send),
:mod:`~activities.deliver.sending` (the cancel grace, a cut send, a send outlived, a
route's unexpected failure) and :mod:`~activities.deliver.recording` (the receipt, a cut,
a failure as its verdict decides).
"""

from __future__ import annotations

from activities.deliver.activity import DeliverActivity
from activities.deliver.recording import DeliveryRecords, Recorded
from activities.deliver.sending import CANCEL_GRACE_S, SendCut

__all__ = ["CANCEL_GRACE_S", "DeliverActivity", "DeliveryRecords", "Recorded", "SendCut"]
