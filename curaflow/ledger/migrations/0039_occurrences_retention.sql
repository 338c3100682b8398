-- A scheduled job's nominal time (epoch ms, UTC): the outcome's occurrence_at, and what
-- the schedule watch compares with the times a plan's spec matched. NULL for protocol
-- jobs (their occurrence is their admission, created_at) and for scheduled jobs admitted
-- before this column existed.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS occurrence_at bigint;
CREATE INDEX IF NOT EXISTS jobs_schedule_occurrence ON jobs (schedule_id, occurrence_at)
    WHERE schedule_id IS NOT NULL;

-- How far the schedule watch has accounted for a plan's nominal times (epoch ms, UTC):
-- every matched time before it was either run or named in schedule_misses.
ALTER TABLE schedule_watch ADD COLUMN IF NOT EXISTS checked_until bigint;

-- The occurrences a plan did not run, each named by its nominal time and its cause
-- (curaflow.domain.occurrence.MissCause).
CREATE TABLE IF NOT EXISTS schedule_misses (
    schedule_id  text NOT NULL,
    nominal_at   bigint NOT NULL,
    why          text NOT NULL,
    recorded_at  bigint NOT NULL,
    PRIMARY KEY (schedule_id, nominal_at)
);

-- Retention (curaflow.ledger.retention): when a finished job's events, candidate reports
-- and artifacts were pruned (epoch ms, UTC); NULL while they are kept.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS pruned_at bigint;
