-- One rate gate per Pixiv account: the spacing between source requests and the
-- rate-limit cooldown, shared by every worker process and kept across restarts.
-- Times are epoch milliseconds taken from the database clock, so hosts with skewed
-- clocks still agree.

CREATE TABLE source_gates (
    gate            text PRIMARY KEY,            -- the account's source task queue name
    next_at         bigint NOT NULL DEFAULT 0,   -- earliest start of the next request
    cooldown_until  bigint NOT NULL DEFAULT 0,   -- no request before this (rate limited)
    penalty         integer NOT NULL DEFAULT 0,  -- steps climbed on the cooldown ladder
    successes       integer NOT NULL DEFAULT 0,  -- consecutive successes since the last rate limit
    requests        bigint NOT NULL DEFAULT 0,   -- slots handed out (diagnostics)
    rate_limits     bigint NOT NULL DEFAULT 0,   -- rate limits seen (diagnostics)
    last_rate_limit_at bigint,
    updated_at      bigint NOT NULL DEFAULT 0
);
