-- curaflow ledger, version 47: what kind of wait the receiver asked of a send, so the report says it.
-- delivery_intents.held_kind: why held_until holds the intent's next attempt — 'rate_limited'
-- (the receiver rate-limited the send: curaflow.ledger.deliveries.hold_intent) or
-- 'unavailable' (it answered a 5xx with a Retry-After: it is down and asked curaflow to come
-- back then: curaflow.ledger.deliveries.record_failed). NULL with a held_until: a row written
-- before this version, always a rate limit. Read only by the job's finish
-- (curaflow.domain.holds.held_by: cells.held_by's kind).
ALTER TABLE delivery_intents ADD COLUMN IF NOT EXISTS held_kind text;
