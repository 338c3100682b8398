-- curaflow ledger, version 49: a cell's hold of a kind added after version 46, kept where a build of before does not read it.
-- cells.held_by_added: the hold the job's finish found on a cell it ended when its kind is
-- not one of curaflow.domain.holds.KINDS_OF_0046 (today: 'unavailable', version 47). A
-- build of before 2026-12-05 reads cells.held_by with a closed list of kinds and failed the
-- whole read of such a job (GET /jobs/{id}, a cancel, a schedule's follow) while it still
-- ran during a rolling upgrade, or after a rollback; held_by stays NULL for such a hold, so
-- that build reads no structured hold (the cell's terminal_reason_message, written with it,
-- still says it). Written by curaflow.ledger.cells.finish_cell, read by
-- curaflow.ledger.records.cell_from_row (held_by_added first, then held_by).
ALTER TABLE cells ADD COLUMN IF NOT EXISTS held_by_added jsonb;
