-- curaflow ledger, version 48: a cell's files no longer needed on any store.
-- artifact_holdings.done_at: when the cell's delivery made its artifact folders garbage on
-- every store that holds one (storage_mode = "cache", the cell submitted: written by the
-- deliver that recorded it, activities.deliver.recording.DeliveryRecords._confirmed). Each
-- store's own retention pass deletes its folder and then the row
-- (curaflow.ledger.holdings.release), as for a pruned job: workers share no disk, so the
-- host that fetched may not be the one that delivered. NULL: the folder is kept until its
-- job is pruned.
ALTER TABLE artifact_holdings ADD COLUMN IF NOT EXISTS done_at bigint;
-- A pass reads only its store's rows to delete.
CREATE INDEX IF NOT EXISTS artifact_holdings_done ON artifact_holdings (store_id) WHERE done_at IS NOT NULL;
