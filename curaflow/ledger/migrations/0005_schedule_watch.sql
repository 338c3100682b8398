-- Last seen Temporal counters of missed (outside the catch-up window) and overlap-skipped
-- occurrences per schedule, so each miss is logged and counted exactly once across
-- worker processes and restarts (curaflow/schedules.py watch_tick).
CREATE TABLE IF NOT EXISTS schedule_watch (
    schedule_id     text PRIMARY KEY,
    missed_catchup  bigint NOT NULL DEFAULT 0,
    skipped_overlap bigint NOT NULL DEFAULT 0,
    updated_at      bigint NOT NULL
);

-- Scheduled jobs by plan and occurrence date (operators list a plan's recent jobs).
CREATE INDEX IF NOT EXISTS jobs_schedule ON jobs (schedule_id, occurrence_date) WHERE schedule_id IS NOT NULL;
