"""Former name of :mod:`curaflow.pushes` (issue 16: one word, *push*).

Kept only so that ``activities/callbacks.py`` and ``curaflow/worker.py`` import until they
switch to :mod:`curaflow.pushes`; then delete this module.
"""

from curaflow.pushes import Verdict, classify_answer, push_headers, run_push_sweeper

callback_headers = push_headers

__all__ = ["Verdict", "callback_headers", "classify_answer", "run_push_sweeper"]
