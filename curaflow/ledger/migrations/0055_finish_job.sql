-- curaflow ledger, version 55: a job's end written in one statement (2026-12-07).
--
-- curaflow_finish_job is the last two statements of curaflow/ledger/finish.py `_finish`,
-- run in order in the caller's transaction, one round trip: the job row's end, its cells'
-- leases released, the ledger's copy of its artifacts removed and the outcome record
-- inserted (the statement _finish sent itself until this version), then the job's
-- terminal event through curaflow_append_event (the one place an event is appended,
-- decision 9). It decides nothing: the verdict, the stage, the outcome and the event's
-- type and body come from the caller, which holds the job row's lock. Workers of
-- earlier versions keep sending the two statements; both write the same rows.
CREATE OR REPLACE FUNCTION curaflow_finish_job(
    p_job_id text, p_business_status text, p_at bigint, p_last_stage text, p_alertable boolean,
    p_record jsonb, p_type text, p_payload jsonb, p_channel text
) RETURNS TABLE (o_inserted boolean, o_seq integer, o_at bigint, o_callback_url text, o_correlation_id text)
LANGUAGE plpgsql AS $$
DECLARE
    v_inserted text;
    r record;
BEGIN
    WITH job AS (UPDATE jobs SET business_status = p_business_status, completed_at = p_at, updated_at = p_at,
                                 last_stage = p_last_stage
                 WHERE job_id = p_job_id),
         lease AS (UPDATE cells SET lease_until = NULL, lease_owner = NULL WHERE job_id = p_job_id),
         -- the artifacts' copy for other processes (curaflow.ledger.artifacts)
         chunks AS (DELETE FROM artifact_chunks WHERE job_id = p_job_id)
    INSERT INTO outcomes (job_id, business_status, alertable, record, created_at)
    VALUES (p_job_id, p_business_status, p_alertable, p_record, p_at)
    ON CONFLICT (job_id) DO NOTHING RETURNING outcomes.job_id INTO v_inserted;
    o_inserted := v_inserted IS NOT NULL;
    SELECT * INTO r FROM curaflow_append_event(p_job_id, p_type, p_at, p_payload, p_channel);
    IF FOUND THEN
        o_seq := r.o_seq;
        o_at := r.o_at;
        o_callback_url := r.o_callback_url;
        o_correlation_id := r.o_correlation_id;
    END IF;
    RETURN NEXT;
END $$;
