-- A refresh token Pixiv answered beside an access token curaflow cannot use: kept as a
-- candidate beside the rotated token (never in its place), tried first at the next
-- refresh and dropped when that refresh settles it (curaflow.sources.tokens). A row may
-- hold only a candidate (no token rotated yet).

ALTER TABLE source_tokens ADD COLUMN candidate_token text;   -- NULL: none
ALTER TABLE source_tokens ALTER COLUMN refresh_token DROP NOT NULL;
