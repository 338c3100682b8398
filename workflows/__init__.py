"""Temporal workflows: deterministic orchestration, no I/O (all I/O is in ``activities``)."""
