-- curaflow ledger, version 54: a job's admission in one statement (2026-12-07).
--
-- curaflow_admit_job is curaflow/ledger/jobs.py `insert_job`'s two statements run in
-- order, one round trip: the insert-if-absent of the job row, its cells and its frozen
-- answer, dated by one read of the database's clock (the statement insert_job sent
-- itself until this version), then — only when it created the job — `job.accepted`
-- through curaflow_append_event at the job's created_at (the one place an event is
-- appended, decision 9). It decides nothing insert_job did not: the answer's text, the
-- workflow input and the event's body come from the caller. A function of one call is
-- one transaction, so a caller that needs none of its own (a job without a callback_url:
-- no push to enqueue with the event) sends no BEGIN / COMMIT. Workers of earlier
-- versions keep sending the two statements; both write the same rows.
CREATE OR REPLACE FUNCTION curaflow_admit_job(
    p_job_id text, p_job_type text, p_plan_id text, p_schedule_id text, p_trigger text,
    p_idempotency_key text, p_correlation_id text, p_callback_url text, p_labels jsonb, p_params jsonb,
    p_target_ids text[], p_workflow_input jsonb, p_created_at bigint, p_deadline_at bigint,
    p_occurrence_date text, p_answer text, p_occurrence_at bigint, p_deadline_ms bigint,
    p_deadline_bound bigint, p_min_deadline bigint, p_accepted jsonb, p_channel text
) RETURNS TABLE (o_now bigint, o_job_id text, o_created_at bigint, o_deadline_at bigint,
                 o_admission_response json, o_seq integer, o_at bigint, o_callback_url text,
                 o_correlation_id text)
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    WITH clock AS (SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint AS now),
    times AS (
        SELECT now, COALESCE(p_created_at, now) AS created_at,
               COALESCE(p_deadline_at, CASE WHEN p_deadline_bound IS NULL THEN now + p_deadline_ms
                                           ELSE LEAST(now + p_deadline_ms, GREATEST(p_deadline_bound, now)) END)
                   AS deadline_at
        FROM clock),
    job AS (
        INSERT INTO jobs (job_id, job_type, plan_id, schedule_id, trigger, idempotency_key,
            correlation_id, callback_url, labels, params, target_ids, workflow_input,
            created_at, updated_at, deadline_at, occurrence_date, admission_response, occurrence_at)
        SELECT p_job_id, p_job_type, p_plan_id, p_schedule_id, p_trigger, p_idempotency_key,
               p_correlation_id, p_callback_url, p_labels, p_params, p_target_ids,
               p_workflow_input || jsonb_build_object('created_at_ms', t.created_at, 'deadline_at_ms', t.deadline_at),
               t.created_at, t.created_at, t.deadline_at, p_occurrence_date,
               format(p_answer, t.created_at, COALESCE(t.deadline_at::text, 'null'))::json, p_occurrence_at
        FROM times t WHERE p_deadline_bound IS NULL OR t.deadline_at - t.created_at >= p_min_deadline
        ON CONFLICT DO NOTHING RETURNING jobs.job_id, jobs.created_at, jobs.deadline_at, jobs.admission_response),
    cell AS (
        INSERT INTO cells (job_id, target_id, position, created_at, updated_at)
        SELECT job.job_id, u.t, u.p - 1, job.created_at, job.created_at
        FROM job, unnest(p_target_ids) WITH ORDINALITY AS u(t, p))
    SELECT times.now, job.job_id, job.created_at, job.deadline_at, job.admission_response
        INTO o_now, o_job_id, o_created_at, o_deadline_at, o_admission_response
    FROM times LEFT JOIN job ON true;
    IF o_job_id IS NOT NULL THEN
        SELECT * INTO r FROM curaflow_append_event(o_job_id, 'job.accepted', o_created_at, p_accepted, p_channel);
        IF NOT FOUND THEN
            RAISE EXCEPTION 'job % created but no job.accepted appended', o_job_id;
        END IF;
        o_seq := r.o_seq;
        o_at := r.o_at;
        o_callback_url := r.o_callback_url;
        o_correlation_id := r.o_correlation_id;
    END IF;
    RETURN NEXT;
END $$;
