-- curaflow ledger, version 44: a work skipped on an answer of the source not recognised as
-- the work's (the image host's 403, a page that is no image) is *held* back for the
-- account for a while (pixiv.unrecognised_hold_ms), not remembered unavailable. Later scans
-- are told `unrecognised` — a verdict that does not last — so a target's scan frontier never moves
-- past it for good while it is held (curaflow.ledger.remembered.known_works,
-- curaflow.sources.pixiv.frontier.rules.LASTING_REASONS).
ALTER TABLE unavailable_works ADD COLUMN IF NOT EXISTS held boolean NOT NULL DEFAULT false;
