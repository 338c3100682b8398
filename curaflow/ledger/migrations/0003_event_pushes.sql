-- curaflow ledger, version 3: push state of job events to a job's callback_url; the
-- frozen admission response kept as written.
--
-- One row per (job, event) for jobs admitted with a callback_url, inserted in the same
-- transaction as the event (curaflow.ledger.events.append_event). `body` is the Event
-- JSON frozen at enqueue (type json, not jsonb, so the bytes sent are the bytes stored).
-- Push state never touches event_cursors (the consumer's ack cursor) nor the job.
-- All times are epoch milliseconds (UTC).

CREATE TABLE event_pushes (
    job_id        text NOT NULL,
    seq           integer NOT NULL,
    event_id      text NOT NULL,
    url           text NOT NULL,
    body          json NOT NULL,
    status        text NOT NULL DEFAULT 'pending',   -- pending | delivered | dead
    attempts      integer NOT NULL DEFAULT 0,
    last_status   integer,                            -- HTTP status of the last attempt (NULL: no answer)
    last_error    text,
    claimed_by    text,                               -- the push activity attempt sending it now
    claimed_until bigint,
    created_at    bigint NOT NULL,
    updated_at    bigint NOT NULL,
    completed_at  bigint,
    PRIMARY KEY (job_id, seq),
    FOREIGN KEY (job_id, seq) REFERENCES job_events (job_id, seq) ON DELETE CASCADE
);

-- The sweeper looks for pending pushes nobody is working on.
CREATE INDEX event_pushes_pending ON event_pushes (updated_at) WHERE status = 'pending';

-- A replay must answer the first admission's body byte for byte: jsonb reorders object
-- keys, json keeps the text as written.
ALTER TABLE jobs ALTER COLUMN admission_response TYPE json USING admission_response::json;
