-- curaflow ledger, version 43: a work remembered unavailable because of what the source
-- sent for it (an image URL on a host that is not the source's image host), not because
-- the work is gone. Later scans count it `unusable` rather than `unavailable`, so a cell's
-- tally — and a search whose every work was unusable, a source failure — reads the same
-- in every job (curaflow/domain/tally.py, curaflow.domain.verdicts.no_candidate_verdict).
ALTER TABLE unavailable_works ADD COLUMN IF NOT EXISTS unusable boolean NOT NULL DEFAULT false;
