-- jobs.status was never written after the insert: it read 'pending' for every job, queued
-- or finished. A job's status is derived from its cells (curaflow.domain.projection, the
-- one owner), so a stored copy could only drift: the column goes.
ALTER TABLE jobs DROP COLUMN IF EXISTS status;
