-- curaflow ledger, version 56: a route's receipt locks the job and records itself in one
-- statement (2026-12-07).
--
-- curaflow_record_delivered is the first two statements of curaflow/ledger/deliveries.py
-- `record_delivered`, run in order in the caller's transaction, one round trip: the job
-- row locked (what `lock_job` locks; the stage rule's `last_stage` and the number of
-- the job's cells returned, for a job of one cell), then the receipt written — the
-- intent, the route's streak and the work's hold on the route — with the statuses of
-- the cell's live intents afterwards (the statement record_delivered sent itself until
-- this version). It decides nothing: whether the cell ends is the caller's, in the
-- statements that follow under the same lock. Workers of earlier versions keep sending
-- the two statements; both lock and write the same rows in the same order.
CREATE OR REPLACE FUNCTION curaflow_record_delivered(
    p_job_id text, p_target_id text, p_idempotency_key text, p_status text, p_remote_id text,
    p_remote_ids jsonb, p_remote_status text, p_at bigint
) RETURNS TABLE (o_job_found boolean, o_last_stage text, o_cells integer, o_statuses text[])
LANGUAGE plpgsql AS $$
BEGIN
    SELECT j.last_stage, cardinality(j.target_ids) INTO o_last_stage, o_cells
        FROM jobs j WHERE j.job_id = p_job_id FOR UPDATE;
    o_job_found := FOUND;
    -- A statement of its own after the lock: it reads the intents as committed when the
    -- lock was granted (lock_job's rule). The CTE's update is not visible to the outer
    -- query: merged.
    WITH upd AS (
        UPDATE delivery_intents
           SET status = p_status, remote_id = p_remote_id, remote_ids = p_remote_ids, remote_status = p_remote_status,
               delivered_at = p_at, updated_at = p_at,
               last_error = CASE WHEN status IN ('reserved', 'sending') THEN NULL
                                 ELSE 'the route confirmed it after its cell ended (' || status || ')' END
        WHERE idempotency_key = p_idempotency_key AND status NOT IN ('delivered', 'duplicate')
        RETURNING idempotency_key, status, route, work_type, work_id),
    gate AS (
        UPDATE route_gates g SET rate_limits = 0, streak_answer = NULL, streak_works = '[]'::jsonb
        FROM upd WHERE g.route = upd.route AND (g.rate_limits > 0 OR g.streak_answer IS NOT NULL)),
    hold AS (
        DELETE FROM route_refusals r USING upd
        WHERE r.route = upd.route AND r.work_type = upd.work_type AND r.work_id = upd.work_id
          AND r.until IS NOT NULL)
    SELECT COALESCE(array_agg(COALESCE(u.status, d.status)), '{}'::text[]) INTO o_statuses
    FROM delivery_intents d LEFT JOIN upd u ON u.idempotency_key = d.idempotency_key
    WHERE d.job_id = p_job_id AND d.target_id = p_target_id AND COALESCE(u.status, d.status) <> 'released';
    RETURN NEXT;
END $$;
