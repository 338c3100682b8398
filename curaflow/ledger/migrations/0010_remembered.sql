-- curaflow ledger, version 10: what the sources and the routes told us, remembered.
--
-- * route_refusals: a route refused a work for good (delivery_rejected). Every later job
--   skips that work for that route, until an operator clears the row
--   (`curaflow refusals clear ROUTE WORK_ID`).
-- * unavailable_works: a work found unavailable when fetched (404, 403/410, deleted,
--   restricted), per Pixiv account (keyed like its gate, by the account's source task
--   queue), until `until` (pixiv.unavailable_ttl_ms later).
-- * source_gates.paused_until: the account answered "Your access is currently
--   restricted."; no request of it leaves before this time (epoch ms, database clock).

CREATE TABLE route_refusals (
    route       text NOT NULL,
    work_type   text NOT NULL,
    work_id     text NOT NULL,
    reason      text NOT NULL,
    error       text,
    job_id      text,
    target_id   text,
    refused_at  bigint NOT NULL,
    PRIMARY KEY (route, work_type, work_id)
);

CREATE TABLE unavailable_works (
    gate        text NOT NULL,               -- the account's source task queue name
    work_type   text NOT NULL,
    work_id     text NOT NULL,
    why         text,
    job_id      text,
    seen_at     bigint NOT NULL,
    until       bigint NOT NULL,
    PRIMARY KEY (gate, work_type, work_id)
);

ALTER TABLE source_gates ADD COLUMN paused_until bigint NOT NULL DEFAULT 0;
ALTER TABLE source_gates ADD COLUMN pause_reason text;
