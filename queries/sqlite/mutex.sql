-- name: Acquire :one
-- Every statement here reads SQLite's clock as epoch ms,
-- CAST(unixepoch('subsec') * 1000 AS INTEGER), which is the same for the
-- whole statement, decides expiry by it (a grant is live while
-- transition_at > now; an empty owner_id is a free mutex) and returns it
-- as now_ms, so the caller reports remaining durations only.
-- Grants the mutex when it is free or its transition has ended (token + 1),
-- extends it when owner_id already holds a live grant (token kept), and
-- returns no row when someone else holds it. SET reads the row as it was
-- (no MySQL-style left-to-right assignment).
INSERT INTO simba_mutex AS m (mutex, owner_id, acquired_at, ttl_at, transition_at, token, version)
VALUES (
    sqlc.arg(mutex), sqlc.arg(owner_id),
    CAST(unixepoch('subsec') * 1000 AS INTEGER),
    CAST(unixepoch('subsec') * 1000 AS INTEGER) + CAST(sqlc.arg(ttl_ms) AS INTEGER),
    CAST(unixepoch('subsec') * 1000 AS INTEGER) + CAST(sqlc.arg(ttl_ms) AS INTEGER) + CAST(sqlc.arg(transition_ms) AS INTEGER),
    1, 1)
ON CONFLICT (mutex) DO UPDATE SET
    token         = CASE WHEN m.owner_id = '' OR m.transition_at <= excluded.acquired_at
                         THEN m.token + 1 ELSE m.token END,
    acquired_at   = CASE WHEN m.owner_id = '' OR m.transition_at <= excluded.acquired_at
                         THEN excluded.acquired_at ELSE m.acquired_at END,
    owner_id      = excluded.owner_id,
    ttl_at        = excluded.ttl_at,
    transition_at = excluded.transition_at,
    version       = m.version + 1
WHERE m.owner_id = '' OR m.transition_at <= excluded.acquired_at OR m.owner_id = excluded.owner_id
RETURNING owner_id, token, ttl_at, transition_at, CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now_ms;

-- name: Renew :one
-- Extends the live grant of owner_id with token from now; no row when that
-- grant is not the current one or its transition has ended.
UPDATE simba_mutex SET
    ttl_at        = CAST(unixepoch('subsec') * 1000 AS INTEGER) + CAST(sqlc.arg(ttl_ms) AS INTEGER),
    transition_at = CAST(unixepoch('subsec') * 1000 AS INTEGER) + CAST(sqlc.arg(ttl_ms) AS INTEGER) + CAST(sqlc.arg(transition_ms) AS INTEGER),
    version       = version + 1
WHERE mutex = sqlc.arg(mutex) AND owner_id = sqlc.arg(owner_id) AND token = sqlc.arg(token)
  AND transition_at > CAST(unixepoch('subsec') * 1000 AS INTEGER)
RETURNING owner_id, token, ttl_at, transition_at, CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now_ms;

-- name: Release :execrows
-- Ends the live grant of owner_id with token: the mutex is free from now
-- on. The token column is kept, so the next grant's token is greater.
UPDATE simba_mutex SET
    owner_id      = '',
    ttl_at        = CAST(unixepoch('subsec') * 1000 AS INTEGER),
    transition_at = CAST(unixepoch('subsec') * 1000 AS INTEGER),
    version       = version + 1
WHERE mutex = sqlc.arg(mutex) AND owner_id = sqlc.arg(owner_id) AND token = sqlc.arg(token)
  AND transition_at > CAST(unixepoch('subsec') * 1000 AS INTEGER);

-- name: Get :one
-- Reads a mutex with the clock's now; no row for an unknown mutex.
SELECT owner_id, token, ttl_at, transition_at, CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now_ms
FROM simba_mutex
WHERE mutex = sqlc.arg(mutex);

-- name: List :many
-- Every mutex with an owner whose transition has not ended, by name, with
-- the clock's now.
SELECT mutex, owner_id, token, ttl_at, transition_at, CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now_ms
FROM simba_mutex
WHERE owner_id <> '' AND transition_at > CAST(unixepoch('subsec') * 1000 AS INTEGER)
ORDER BY mutex;
