"""The cyclic garbage collector of a long-running service process (CPython's :mod:`gc`).

A service process (a worker, the API) allocates many short-lived objects a job (payloads, pydantic models, workflow
activations); with CPython's defaults (a young collection every 700 net allocations) the
collector took ~5 % of the worker's CPU in the throughput benchmark, most of it full
collections walking every object the process imported at start — objects that live as
long as the process. :func:`settle_heap`, called once the process has started (the
worker when its Temporal workers are built, ``curaflow api`` when its app is):

* moves everything alive then into the permanent generation (:func:`gc.freeze`, as the
  :mod:`gc` documentation suggests for a process that has finished starting): full
  collections no longer walk the modules, schemas and clients of the start;
* makes young collections rarer (:data:`YOUNG_THRESHOLD` allocations instead of 700):
  short-lived objects die by reference counting before a collection sees them, so fewer
  survive into the older generations.

Nothing is kept that would otherwise be freed: reference counting frees what it always
did; only cycles among objects allocated after the start wait for the (rarer) collection
that finds them. Measured in docs/performance.md ("The collector").
"""

from __future__ import annotations

import gc

from curaflow.observability.logs import get_logger

log = get_logger("curaflow.process.heap")

#: Net allocations between two young-generation collections (CPython's default: 700).
YOUNG_THRESHOLD = 10_000


def settle_heap() -> int:
    """Collect once, freeze what survives, and raise the young generation's threshold;
    logs ``process.heap_settled`` with both.

    Call it once per process, after start-up (imports, clients, workers built) and before
    the work begins; the older generations' thresholds stay CPython's.

    Returns:
        How many objects are frozen (:func:`gc.get_freeze_count`).
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
    frozen = gc.get_freeze_count()
    log.info("process.heap_settled", frozen_objects=frozen, young_threshold=YOUNG_THRESHOLD)
    return frozen
