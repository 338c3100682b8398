#!/bin/sh
# Create or upgrade Temporal's schemas on PostgreSQL (the compose stack's `temporal-schema`
# job, run in temporalio/admin-tools). Idempotent: `create` ignores an existing database,
# `setup-schema -v 0.0` skips a database already past 0.0, `update-schema` applies only the
# versions not applied yet. Any failure stops the stack (set -eu), never a half-set schema.
set -eu

: "${POSTGRES_SEEDS:?POSTGRES_SEEDS is required}"
: "${POSTGRES_USER:?POSTGRES_USER is required}"
: "${SQL_PASSWORD:?SQL_PASSWORD is required}"
case "$SQL_PASSWORD" in
  change-me* | Change-Me* | CHANGE-ME*)
    echo "temporal-schema: TEMPORAL_DB_PASSWORD still holds the example value of the env file: set a real password" >&2
    exit 1
    ;;
esac
PORT="${DB_PORT:-5432}"
SCHEMA=/etc/temporal/schema/postgresql/v12

sql() {
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$PORT" -u "$POSTGRES_USER" "$@"
}

for pair in temporal:temporal temporal_visibility:visibility; do
  db="${pair%%:*}"
  dir="${pair##*:}"
  echo "temporal-schema: $db"
  sql --db "$db" create
  sql --db "$db" setup-schema -v 0.0
  sql --db "$db" update-schema -d "$SCHEMA/$dir/versioned"
done
echo "temporal-schema: done"
