"""Counting the statements and transactions a process sends to the ledger, by step.

Every ledger statement is a round trip and PostgreSQL CPU, on every job: the count per
job is one of the figures ``curaflow bench`` reports (``docs/performance.md``). A
:class:`StatementCounter` attached to a pool (``create_pool(counter=…)``) sees every
statement asyncpg sends through ``execute`` / ``fetch*`` (a transaction's ``BEGIN`` and
``COMMIT`` included; asyncpg's own type introspection and a cursor's fetches are not
counted) and files it under the *step* that sent it — the activity type running in
the calling task (``acquire``, ``deliver``, ``finish`` …), or ``background`` outside
any activity (supervised loops, the API).

A **transaction** is a ``BEGIN`` … ``COMMIT``/``ROLLBACK`` block, or one statement sent
outside such a block (PostgreSQL runs it as its own transaction).

Cost: asyncpg builds a log record for each statement once a logger is attached (a few
microseconds), so a worker counts only with ``observability.ledger_statement_metrics``;
the counts are then exported as ``curaflow_ledger_statements_total`` /
``curaflow_ledger_transactions_total``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import asyncpg

from curaflow.observability import metrics

#: The step of a statement sent outside any activity.
BACKGROUND = "background"


def _opens(query: str) -> bool:
    return query[:5].upper() == "BEGIN"


def _closes(query: str) -> bool:
    head = query[:8].upper()
    return head.startswith("COMMIT") or head.startswith("ROLLBACK")


class StatementCounter:
    """Counts statements and transactions per step (module doc).

    Args:
        step: names the step of the calling task (called in the caller's context); the
            default files everything under :data:`BACKGROUND`.
        export: also count into the Prometheus counters.

    Attributes:
        statements / transactions: counts by step since creation.
    """

    def __init__(self, step: Callable[[], str] | None = None, *, export: bool = False) -> None:
        self._step = step or (lambda: BACKGROUND)
        self._export = export
        self.statements: Counter[str] = Counter()
        self.transactions: Counter[str] = Counter()

    def attach(self, conn: asyncpg.Connection) -> None:
        """Count every statement ``conn`` sends from now on (call once per connection)."""
        in_block = [False]

        def logged(record: asyncpg.connection.LoggedQuery) -> None:
            # Runs soon after the statement, in a copy of the caller's context (asyncpg
            # schedules loggers with ``call_soon``), in the order the connection sent them.
            query = record.query.lstrip()
            step = self._step()
            opened = False
            if _opens(query):
                in_block[0] = opened = True
            elif _closes(query):
                in_block[0] = False
            elif not in_block[0]:
                opened = True
            self.statements[step] += 1
            if opened:
                self.transactions[step] += 1
            if self._export:
                metrics.record_ledger_statement(step, opened)

        conn.add_query_logger(logged)

    def totals(self) -> tuple[int, int]:
        """``(statements, transactions)`` over every step."""
        return sum(self.statements.values()), sum(self.transactions.values())
