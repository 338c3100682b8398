-- curaflow ledger, version 57: the callback pushes a prune kept because they were still owed
-- (2026-12-07).
--
-- A prune keeps a pruned job's pushes still pending (and their events): the consumer is
-- owed them, and the sweeper sends them whenever a worker runs again. `kept_at` marks
-- them (epoch ms, the prune's), so each later retention pass finds those settled since
-- through the partial index below — in proportion to what was kept, never by reading
-- every push of every job — and deletes them with their events but the terminal one
-- (curaflow/ledger/retention.py `forget_settled`). Until this version nothing deleted
-- them once sent: the job was marked pruned and no prune took it again. Rows a prune kept
-- before this version are marked here.
ALTER TABLE event_pushes ADD COLUMN IF NOT EXISTS kept_at bigint;
UPDATE event_pushes p SET kept_at = j.pruned_at
    FROM jobs j WHERE j.job_id = p.job_id AND j.pruned_at IS NOT NULL AND p.kept_at IS NULL;
CREATE INDEX IF NOT EXISTS event_pushes_kept ON event_pushes (job_id, seq) WHERE kept_at IS NOT NULL;
