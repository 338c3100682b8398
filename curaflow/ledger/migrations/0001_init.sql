-- curaflow ledger, version 1: jobs, cells, delivery intents, job events, ack cursors,
-- outcome records. All times are epoch milliseconds (UTC) in bigint columns.

CREATE TABLE jobs (
    job_id              text PRIMARY KEY,
    job_type            text NOT NULL,
    plan_id             text NOT NULL,
    schedule_id         text,
    trigger             text NOT NULL,
    idempotency_key     text,
    correlation_id      text,
    callback_url        text,
    labels              jsonb,
    params              jsonb,
    target_ids          text[] NOT NULL,
    workflow_input      jsonb NOT NULL,
    admission_response  jsonb,
    status              text NOT NULL DEFAULT 'pending',
    business_status     text,
    created_at          bigint NOT NULL,
    started_at          bigint,
    updated_at          bigint NOT NULL,
    completed_at        bigint,
    deadline_at         bigint,
    occurrence_date     text,
    attempt             integer NOT NULL DEFAULT 0,
    cancel_requested_at bigint,
    cancel_reason       text,
    workflow_started_at bigint,
    event_seq           integer NOT NULL DEFAULT 0,
    last_stage          text NOT NULL DEFAULT 'queued',
    last_error          text
);

-- Lookup by key is exact and case-sensitive (reference §1.1).
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
-- The reconciler scans open jobs.
CREATE INDEX jobs_open ON jobs (created_at) WHERE completed_at IS NULL;

CREATE TABLE cells (
    job_id                  text NOT NULL REFERENCES jobs (job_id) ON DELETE CASCADE,
    target_id               text NOT NULL,
    position                integer NOT NULL DEFAULT 0,
    state                   text NOT NULL DEFAULT 'pending',
    stage                   text NOT NULL DEFAULT 'queued',
    work_id                 text,
    work_type               text,
    work                    jsonb,
    candidates              jsonb,
    search_checkpoint       jsonb,
    candidate_report        jsonb,
    artifact                jsonb,
    attempt_count           integer NOT NULL DEFAULT 0,
    fallback_stage          integer NOT NULL DEFAULT 0,
    terminal_reason_code    varchar(64),
    terminal_reason_message varchar(400),
    heartbeat_at            bigint,
    lease_until             bigint,
    lease_owner             text,
    created_at              bigint NOT NULL,
    updated_at              bigint NOT NULL,
    completed_at            bigint,
    PRIMARY KEY (job_id, target_id)
);

-- One row per (route, work, job, target): the stable idempotency key sent on the wire.
CREATE TABLE delivery_intents (
    id              bigserial PRIMARY KEY,
    idempotency_key text NOT NULL UNIQUE,
    route           text NOT NULL,
    route_kind      text NOT NULL,
    work_type       text NOT NULL,
    work_id         text NOT NULL,
    job_id          text NOT NULL REFERENCES jobs (job_id) ON DELETE CASCADE,
    target_id       text NOT NULL,
    status          text NOT NULL,
    remote_id       text,
    remote_ids      jsonb,
    remote_status   text,
    attempts        integer NOT NULL DEFAULT 0,
    last_error      text,
    created_at      bigint NOT NULL,
    updated_at      bigint NOT NULL,
    sent_at         bigint,
    delivered_at    bigint
);

-- A work is never delivered twice to one route: at most one live intent per
-- (route, work). 'reserved' is taken when a cell binds the work, 'sending' while a
-- request is in flight, 'unknown' when a request's outcome could not be learnt.
CREATE UNIQUE INDEX delivery_intents_route_work ON delivery_intents (route, work_type, work_id)
    WHERE status IN ('reserved', 'sending', 'delivered', 'duplicate', 'unknown');
CREATE INDEX delivery_intents_cell ON delivery_intents (job_id, target_id);

-- Lifecycle events with a per-job gap-free sequence assigned under the job row lock.
CREATE TABLE job_events (
    job_id  text NOT NULL REFERENCES jobs (job_id) ON DELETE CASCADE,
    seq     integer NOT NULL,
    type    text NOT NULL,
    at      bigint NOT NULL,
    payload jsonb NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (job_id, seq)
);

-- The consumer's durable ack cursor (reference §4.6).
CREATE TABLE event_cursors (
    job_id     text PRIMARY KEY REFERENCES jobs (job_id) ON DELETE CASCADE,
    acked_seq  integer NOT NULL,
    updated_at bigint NOT NULL
);

-- Exactly one outcome record per job (reference §7.1).
CREATE TABLE outcomes (
    job_id          text PRIMARY KEY REFERENCES jobs (job_id) ON DELETE CASCADE,
    business_status text NOT NULL,
    alertable       boolean NOT NULL,
    record          jsonb NOT NULL,
    created_at      bigint NOT NULL
);
