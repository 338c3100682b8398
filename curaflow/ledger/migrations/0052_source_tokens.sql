-- A Pixiv account's refresh token as the token endpoint last rotated it, so that it
-- survives a restart (curaflow.sources.tokens). Tied to the configured token it was
-- rotated from by that token's SHA-256: a token the operator configures anew starts its
-- own chain and wins. Written only when Pixiv answers a refresh token other than the one
-- sent; the row holds a credential (see docs/operations.md, "Secrets").

CREATE TABLE source_tokens (
    account         text PRIMARY KEY,   -- the account's source task queue name (as source_gates.gate)
    origin_sha256   text NOT NULL,      -- SHA-256 (hex) of the configured token it was rotated from
    refresh_token   text NOT NULL,      -- the rotated refresh token
    updated_at      bigint NOT NULL     -- epoch ms, database clock
);
