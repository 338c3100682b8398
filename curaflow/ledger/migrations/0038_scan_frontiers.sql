-- curaflow ledger, version 38: the scan frontier of each target.
--
-- What a target has already examined of one query (curaflow.sources.frontier): the
-- newest work of its known run (date_desc), the end of that run, and where a scan that
-- reached pixiv.max_examined stopped. One row per target and fingerprint (account, work
-- type, query, filters, routes); a changed target gets a new fingerprint and starts
-- afresh, and its old rows are deleted when the new one is written. Advisory only: a
-- work is delivered only when the ledger's intents say it is new.

CREATE TABLE scan_frontiers (
    target_id    text NOT NULL,
    fingerprint  text NOT NULL,
    frontier     jsonb NOT NULL,
    job_id       text,
    updated_at   bigint NOT NULL,             -- epoch ms (UTC)
    PRIMARY KEY (target_id, fingerprint)
);
