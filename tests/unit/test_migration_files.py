"""The ledger's migrations: one version number per file, applied in order."""

from __future__ import annotations

from curaflow.ledger.db import migration_files


def test_every_migration_has_a_version_of_its_own() -> None:
    """Two branches that number a migration alike would leave one of them never applied
    (``schema_migrations`` records versions): :func:`migration_files` refuses it."""
    versions = [version for version, _name, _sql in migration_files()]
    assert versions == sorted(set(versions))
