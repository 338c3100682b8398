-- curaflow ledger, version 50: which attempt has a delivery intent's send out, and until when.
-- delivery_intents.send_owner: the attempt that claimed the send (`<run id>:<activity id>:<attempt>:<nonce>`,
-- activities.deliver), written with status 'sending' by curaflow.ledger.deliveries.claim_send.
-- delivery_intents.send_until: epoch ms (the database's clock) until which that attempt is
-- live: the claim's time plus the step's lease, extended by each ledger beat of the sending
-- attempt (curaflow.ledger.cells.heartbeat). A claim by another attempt while it is live waits
-- for its answer instead of sending the work again: until 2026-12-05 a new run of the job
-- (a client's start that terminated the running one with the same Task, a reset) re-sent an
-- intent whose send was still out. NULL for intents claimed by a build of before: they keep the
-- rule of before (the intent is one that may have landed).
ALTER TABLE delivery_intents ADD COLUMN IF NOT EXISTS send_owner text,
                             ADD COLUMN IF NOT EXISTS send_until bigint;
