"""Workflow Protocol v1: wire models, error codes, Task validation and the Job projection.

The vendored wire contract lives in ``curaflow/protocol/schema/`` (``protocol.schema.json``,
extended with ``JobPage``, ``EventPage`` and ``AckResult``; ``error-mapping.json``).
"""
