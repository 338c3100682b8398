-- curaflow ledger, version 37: scale-out with nothing shared but Temporal and PostgreSQL.
--
-- artifact_chunks: a fetched artifact's bytes, so a deliver attempt on any worker process
-- (any host) can deliver it (curaflow/ledger/artifacts.py). Written by the fetch before
-- the cell is recorded `artifact_ready`, read by a deliver attempt that does not hold
-- the files, deleted with the job's finish (curaflow/ledger/finish.py). Pages are split
-- into chunks of at most 1 MiB, so neither side holds a whole page in memory. Images are
-- already compressed: the column is stored out of line without another compression pass.
CREATE TABLE IF NOT EXISTS artifact_chunks (
    job_id text NOT NULL,
    target_id text NOT NULL,
    work_id text NOT NULL,
    page integer NOT NULL,
    seq integer NOT NULL,
    body bytea NOT NULL,
    PRIMARY KEY (job_id, target_id, work_id, page, seq)
);
ALTER TABLE artifact_chunks ALTER COLUMN body SET STORAGE EXTERNAL;

-- source_queue_leases: which worker process serves an account's source task queue
-- (curaflow/process/source_queues.py). The owner renews `expires_at` (database clock, epoch ms);
-- a standby takes the row only once it lapsed — or once the owner's connection
-- (`backend_pid`) is gone, a dead process — and each take increments `token`, so an
-- owner that was hung and wakes up finds its token gone at its next renewal (fencing).
CREATE TABLE IF NOT EXISTS source_queue_leases (
    task_queue text PRIMARY KEY,
    owner text NOT NULL,
    token bigint NOT NULL,
    expires_at bigint NOT NULL,
    renewed_at bigint NOT NULL,
    backend_pid integer NOT NULL
);
