-- curaflow ledger, version 30: indexes behind the ledger gauges (curaflow/observability/ledger_gauges.py).
--
-- Each process reads the gauges every 15 s; these keep the reads proportional to what
-- they count, not to the size of the tables: dead-lettered callback pushes (all time),
-- and delivery intents changed within the gauges' window.
CREATE INDEX IF NOT EXISTS event_pushes_dead ON event_pushes (job_id) WHERE status = 'dead';
CREATE INDEX IF NOT EXISTS delivery_intents_updated ON delivery_intents (updated_at);
