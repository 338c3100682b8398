"""What the cell modules share of a cell row: the terminal states as SQL text and the
cell's columns qualified for an ``UPDATE … FROM``."""

from __future__ import annotations

from curaflow.domain.cells import TERMINAL_STATES
from curaflow.ledger.records import CELL_COLUMNS

#: The terminal states' names, the ``text[]`` parameter of statements that spare or guard them.
TERMINAL_STATE_NAMES = sorted(str(s) for s in TERMINAL_STATES)

#: The cell's columns qualified by the alias ``c`` (an ``UPDATE … FROM`` returns them unambiguously).
C_COLUMNS = ", ".join("c." + col.strip() for col in CELL_COLUMNS.split(","))
