-- curaflow ledger, version 40: the job-level stage is decided in Python only.
--
-- curaflow_set_job_stage is curaflow/ledger/cells.py `sync_job_stage`'s write, and it is
-- mechanical: the caller computes the stage (curaflow.domain.projection open_stage, the
-- rule GET /jobs/{id} shows) and passes it; this function only appends `job.started`
-- when asked, moves `jobs.last_stage` to the given stage and appends `job.progress` when
-- it moved. curaflow_job_progress (version 32), which computed the stage itself and
-- disagreed with Python on a stage it did not know, stays for workers of the previous
-- version during a rolling upgrade; nothing of this version calls it.
CREATE OR REPLACE FUNCTION curaflow_set_job_stage(
    p_job_id text, p_at bigint, p_stage text, p_started jsonb, p_progress jsonb, p_channel text
) RETURNS TABLE (o_seq integer, o_type text, o_at bigint, o_payload jsonb, o_callback_url text,
                 o_correlation_id text)
LANGUAGE plpgsql AS $$
DECLARE
    v_payload jsonb;
    r record;
BEGIN
    IF p_started IS NOT NULL THEN
        FOR r IN SELECT * FROM curaflow_append_event(p_job_id, 'job.started', p_at, p_started, p_channel) LOOP
            o_seq := r.o_seq; o_type := 'job.started'; o_at := r.o_at; o_payload := p_started;
            o_callback_url := r.o_callback_url; o_correlation_id := r.o_correlation_id;
            RETURN NEXT;
        END LOOP;
    END IF;
    IF p_stage IS NULL THEN
        RETURN;
    END IF;
    UPDATE jobs j SET last_stage = p_stage, updated_at = p_at
        WHERE j.job_id = p_job_id AND j.last_stage IS DISTINCT FROM p_stage;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_payload := jsonb_build_object('progress', jsonb_build_object('stage', p_stage, 'at', p_at)) || p_progress;
    FOR r IN SELECT * FROM curaflow_append_event(p_job_id, 'job.progress', p_at, v_payload, p_channel) LOOP
        o_seq := r.o_seq; o_type := 'job.progress'; o_at := r.o_at; o_payload := v_payload;
        o_callback_url := r.o_callback_url; o_correlation_id := r.o_correlation_id;
        RETURN NEXT;
    END LOOP;
END $$;
