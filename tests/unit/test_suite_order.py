"""The suite's module order (``tests/conftest.py`` ``LONGEST_FIRST``) names modules that exist, once each.

A module renamed or removed would silently fall back to collection order, and the two
processes of ``pytest -n 3`` would no longer finish together.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LONGEST_FIRST

ROOT = Path(__file__).resolve().parents[2]


def test_every_module_of_the_order_exists_once() -> None:
    assert [name for name in LONGEST_FIRST if not (ROOT / name).is_file()] == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
