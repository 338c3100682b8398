-- Retention without a shared disk (curaflow.ledger.retention): which artifact store holds
-- which cell's files, until that store's own worker has deleted them.
--
-- artifact_stores: one row per artifacts directory of a worker (its id is kept in the
-- directory itself, `.store-id`), with a label an operator recognises (host:path) and when
-- its worker last ran a retention pass (epoch ms, UTC).
CREATE TABLE IF NOT EXISTS artifact_stores (
    store_id text PRIMARY KEY,
    label    text NOT NULL,
    seen_at  bigint NOT NULL
);

-- artifact_holdings: a store wrote (or began writing) a cell's artifact folder. Written by
-- the fetch before its first byte; deleted by that store's worker once the folder is gone
-- (its job pruned). Rows of a pruned job are the files still to be deleted on that store.
CREATE TABLE IF NOT EXISTS artifact_holdings (
    job_id    text NOT NULL,
    target_id text NOT NULL,
    store_id  text NOT NULL,
    held_at   bigint NOT NULL,
    PRIMARY KEY (store_id, job_id, target_id)
);
CREATE INDEX IF NOT EXISTS artifact_holdings_job ON artifact_holdings (job_id);
