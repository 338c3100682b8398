-- curaflow ledger, version 51: indexes behind the ledger gauges the failure alerts read
-- (curaflow.ledger.gauges; deploy/prometheus/alerts.yml).
--
-- Until 2026-12-06 those alerts read counters, which live in the memory of the process that
-- counted: a worker killed (SIGKILL, OOM, a host lost) between its count and Prometheus'
-- next scrape took the increment with it, and the page never came although the ledger held
-- the failure. Each process now reads the facts from the ledger every 15 s; these keep each
-- read one probe of a small index, whatever the size of the tables:
-- * jobs_failed_completed: the latest job ended with business status failed;
-- * cells_alerted_reasons: the latest cell ended with a reason an alert pages on
--   (curaflow.observability.metrics.ALERTED_CELL_REASONS; the gauges' statement names each
--   reason as a constant, which the planner proves against this predicate);
-- * schedule_misses_recorded: the misses named within the gauges' lookback.
-- A route's pause is read from route_gates (one row per route); refused and unknown
-- deliveries from the statement that already counts final intents (delivery_intents_updated).
CREATE INDEX IF NOT EXISTS jobs_failed_completed ON jobs (completed_at) WHERE business_status = 'failed';
CREATE INDEX IF NOT EXISTS cells_alerted_reasons ON cells (terminal_reason_code, completed_at)
    WHERE terminal_reason_code IN ('auth_failed', 'account_restricted');
CREATE INDEX IF NOT EXISTS schedule_misses_recorded ON schedule_misses (recorded_at);
