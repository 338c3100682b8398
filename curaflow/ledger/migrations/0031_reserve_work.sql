-- curaflow ledger, version 31: reserve a work on every route of a cell in one round trip.
--
-- curaflow/ledger/cells.py `_reserve` is the only caller; the rule is unchanged (DESIGN.md
-- decision 6): one `reserved` intent per route, a `released` intent of the same key taken
-- back, and none at all when any route already holds the work live (the partial unique
-- index delivery_intents_route_work). The EXCEPTION block is the savepoint the caller
-- used to open, close and roll back with three statements per candidate.
CREATE OR REPLACE FUNCTION curaflow_reserve_work(
    keys text[], routes text[], route_kinds text[], work_type text, work_id text,
    job_id text, target_id text, now_ms bigint
) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO delivery_intents (idempotency_key, route, route_kind, work_type, work_id,
                                  job_id, target_id, status, created_at, updated_at)
    SELECT u.key, u.route, u.kind, $4, $5, $6, $7, 'reserved', $8, $8
    FROM unnest(keys, routes, route_kinds) AS u(key, route, kind)
    ON CONFLICT (idempotency_key) DO UPDATE
        SET status = 'reserved', updated_at = EXCLUDED.updated_at
        WHERE delivery_intents.status = 'released';
    RETURN true;
EXCEPTION WHEN unique_violation THEN
    RETURN false;
END $$;
