-- curaflow ledger, version 46: what held a cell when its job ended, so the report says it.
-- delivery_intents.held_until: when the next attempt of the intent's send may leave after
-- its receiver rate-limited it (epoch ms, database clock; the delay the receiver stated,
-- else the route's backoff: curaflow.ledger.route_gates.rate_limited), written only on a
-- rate-limited failure and cleared by any other (curaflow.ledger.deliveries.record_failed).
-- cells.held_by: the hold the job's finish found on a cell it ended
-- (curaflow.domain.holds.held_by: a route rate-limited, cooling down or paused), read by
-- the cell's message, GET /jobs/{id}'s error.detail.held_by and the outcome record.
ALTER TABLE delivery_intents ADD COLUMN IF NOT EXISTS held_until bigint;
ALTER TABLE cells ADD COLUMN IF NOT EXISTS held_by jsonb;
