-- curaflow ledger, version 45: an intent a cell released because its bound work was found
-- unavailable (curaflow.ledger.cells.rebind_next) remembers whether the answer that
-- released it was recognised as the work's (WorkUnavailable.recognised). The cell's later
-- passes tell a work released on an answer not recognised as its own `unrecognised` — the
-- source's answer, counted `unusable` — even when the account no longer holds it back
-- (pixiv.unrecognised_hold_ms = 0, or a hold over before the next pass):
-- curaflow.ledger.cells.search_resume reads it, curaflow.ledger.remembered.known_works
-- says it. Rows written before this version read false: released as the work's, as before.
ALTER TABLE delivery_intents ADD COLUMN IF NOT EXISTS release_unrecognised boolean NOT NULL DEFAULT false;
