-- curaflow ledger, version 32: appending an event and syncing the job-level stage, each in
-- one round trip (the worker's CPU per job goes largely to ledger statements).
--
-- curaflow_append_event is the one place an event is appended (DESIGN.md decision 9): the
-- job row's `event_seq` is bumped under the row lock (a gap-free, commit-ordered sequence),
-- the row inserted with `at` raised to the stream's latest, and NOTIFY sent (delivered at
-- commit). Its only callers are curaflow/ledger/events.py `append_event` and
-- curaflow_job_progress below; the caller enqueues the push of a job with a callback_url.
--
-- curaflow_job_progress is curaflow/ledger/cells.py `sync_job_stage`: the job-level stage
-- is the least advanced stage among the job's open cells (curaflow.domain.projection
-- job_stage); the caller passes the stage order and the terminal states from
-- curaflow.domain.cells, which stay their owner. Optionally appends `job.started` first
-- (the job's first step). Payload bodies (with their `detail`) come from the caller.
CREATE OR REPLACE FUNCTION curaflow_append_event(
    p_job_id text, p_type text, p_at bigint, p_payload jsonb, p_channel text
) RETURNS TABLE (o_seq integer, o_at bigint, o_callback_url text, o_correlation_id text)
LANGUAGE plpgsql AS $$
DECLARE
    v_seq integer;
    v_callback text;
    v_correlation text;
    v_at bigint;
BEGIN
    UPDATE jobs j SET event_seq = j.event_seq + 1 WHERE j.job_id = p_job_id
        RETURNING j.event_seq, j.callback_url, j.correlation_id INTO v_seq, v_callback, v_correlation;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT GREATEST(p_at, COALESCE(
               (SELECT e.at FROM job_events e WHERE e.job_id = p_job_id ORDER BY e.seq DESC LIMIT 1), 0))
        INTO v_at;
    INSERT INTO job_events (job_id, seq, type, at, payload) VALUES (p_job_id, v_seq, p_type, v_at, p_payload);
    PERFORM pg_notify(p_channel, p_job_id);
    o_seq := v_seq;
    o_at := v_at;
    o_callback_url := v_callback;
    o_correlation_id := v_correlation;
    RETURN NEXT;
END $$;

CREATE OR REPLACE FUNCTION curaflow_job_progress(
    p_job_id text, p_at bigint, p_open_stages text[], p_terminal_states text[],
    p_started jsonb, p_progress jsonb, p_channel text
) RETURNS TABLE (o_seq integer, o_type text, o_at bigint, o_payload jsonb, o_callback_url text,
                 o_correlation_id text)
LANGUAGE plpgsql AS $$
DECLARE
    v_stage text;
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
    SELECT p_open_stages[min(array_position(p_open_stages, c.stage))] INTO v_stage
        FROM cells c WHERE c.job_id = p_job_id AND NOT (c.state = ANY (p_terminal_states));
    IF v_stage IS NULL THEN
        RETURN;
    END IF;
    UPDATE jobs j SET last_stage = v_stage, updated_at = p_at
        WHERE j.job_id = p_job_id AND j.last_stage IS DISTINCT FROM v_stage;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_payload := jsonb_build_object('progress', jsonb_build_object('stage', v_stage, 'at', p_at)) || p_progress;
    FOR r IN SELECT * FROM curaflow_append_event(p_job_id, 'job.progress', p_at, v_payload, p_channel) LOOP
        o_seq := r.o_seq; o_type := 'job.progress'; o_at := r.o_at; o_payload := v_payload;
        o_callback_url := r.o_callback_url; o_correlation_id := r.o_correlation_id;
        RETURN NEXT;
    END LOOP;
END $$;
