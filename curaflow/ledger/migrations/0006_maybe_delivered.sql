-- curaflow ledger, version 6: remember that a delivery intent's request may have landed.
--
-- A request whose outcome was never learnt (a timeout after sending, or an attempt that
-- died mid-send) may have reached the destination even when a later attempt fails for
-- good. Such an intent must keep blocking its (route, work) — status 'unknown' instead of
-- 'failed' or 'released' — so no other job delivers the same work to that route again.
ALTER TABLE delivery_intents ADD COLUMN maybe_delivered boolean NOT NULL DEFAULT false;
