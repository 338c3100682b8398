-- curaflow ledger, version 41: a route that keeps refusing is broken, not its works.
--
-- * route_refusals.until: NULL for a refusal of the work itself (for good, until an
--   operator clears it); a time (epoch ms) for a work *held back* from the route after
--   the route refused the request (route_refused: its destination, rights or limits, or
--   an answer curaflow does not know): later scans skip it until then, so the next job
--   tries another work, and the work is not used up. `holds` counts the holds in a row
--   (each one twice as long, curaflow.ledger.remembered.hold_work).
-- * route_gates: one row per route, written only when a send fails (and reset by the
--   statement that records a delivery): the route's refusal streak (the same answer for
--   several different works in a row pauses the route and lifts the refusals the streak
--   recorded), its pause (`paused_until`: no send until then; `curaflow routes resume`),
--   its cooldown after a global or IP-level rate limit (`cooldown_until`) and its rate
--   limits in a row (`rate_limits`: the step of the backoff of a limit without a stated
--   delay). Times are epoch ms on the database clock.
ALTER TABLE route_refusals ADD COLUMN until bigint;
ALTER TABLE route_refusals ADD COLUMN holds integer NOT NULL DEFAULT 0;

CREATE TABLE route_gates (
    route           text PRIMARY KEY,
    paused_until    bigint NOT NULL DEFAULT 0,
    pause_reason    text,
    pauses          integer NOT NULL DEFAULT 0,
    cooldown_until  bigint NOT NULL DEFAULT 0,
    rate_limits     integer NOT NULL DEFAULT 0,
    streak_answer   text,
    streak_works    jsonb NOT NULL DEFAULT '[]'::jsonb,
    updated_at      bigint NOT NULL DEFAULT 0
);
