-- name: Acquire :one
-- Every statement here reads the server's clock once (clock_timestamp() in
-- the CTE n), decides expiry by it (a grant is live while
-- transition_at > now; an empty owner_id is a free mutex) and returns it as
-- now_ms, so the caller reports remaining durations only.
-- Grants the mutex when it is free or its transition has ended (token + 1),
-- extends it when owner_id already holds a live grant (token kept), and
-- otherwise changes nothing. Returns the row it wrote, or, when it wrote
-- none, the row as the statement's snapshot saw it (the owner that kept
-- it, in one round trip); no row when the mutex was inserted by a
-- transaction the snapshot does not see.
WITH n AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms),
up AS (
    INSERT INTO simba_mutex AS m (mutex, owner_id, acquired_at, ttl_at, transition_at, token, version)
    SELECT sqlc.arg(mutex)::varchar, sqlc.arg(owner_id)::varchar, n.ms,
           n.ms + sqlc.arg(ttl_ms)::bigint, n.ms + sqlc.arg(ttl_ms)::bigint + sqlc.arg(transition_ms)::bigint,
           1, 1
    FROM n
    ON CONFLICT (mutex) DO UPDATE SET
        token         = CASE WHEN m.owner_id = '' OR m.transition_at <= EXCLUDED.acquired_at
                             THEN m.token + 1 ELSE m.token END,
        acquired_at   = CASE WHEN m.owner_id = '' OR m.transition_at <= EXCLUDED.acquired_at
                             THEN EXCLUDED.acquired_at ELSE m.acquired_at END,
        owner_id      = EXCLUDED.owner_id,
        ttl_at        = EXCLUDED.ttl_at,
        transition_at = EXCLUDED.transition_at,
        version       = m.version + 1
    WHERE m.owner_id = '' OR m.transition_at <= EXCLUDED.acquired_at OR m.owner_id = EXCLUDED.owner_id
    RETURNING m.owner_id, m.token, m.ttl_at, m.transition_at
)
SELECT up.owner_id, up.token, up.ttl_at, up.transition_at, (SELECT n.ms FROM n)::bigint AS now_ms
FROM up
UNION ALL
SELECT s.owner_id, s.token, s.ttl_at, s.transition_at, (SELECT n.ms FROM n)::bigint AS now_ms
FROM simba_mutex AS s
WHERE s.mutex = sqlc.arg(mutex) AND NOT EXISTS (SELECT 1 FROM up);

-- name: Renew :one
-- Extends the live grant of owner_id with token from now; no row when that
-- grant is not the current one or its transition has ended.
WITH n AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms)
UPDATE simba_mutex AS m SET
    ttl_at        = n.ms + sqlc.arg(ttl_ms)::bigint,
    transition_at = n.ms + sqlc.arg(ttl_ms)::bigint + sqlc.arg(transition_ms)::bigint,
    version       = m.version + 1
FROM n
WHERE m.mutex = sqlc.arg(mutex) AND m.owner_id = sqlc.arg(owner_id) AND m.token = sqlc.arg(token)
  AND m.transition_at > n.ms
RETURNING m.owner_id, m.token, m.ttl_at, m.transition_at, n.ms AS now_ms;

-- name: Release :one
-- Ends the live grant of owner_id with token: the mutex is free from now
-- on. The token column is kept, so the next grant's token is greater.
-- When it ends a grant it also sends a notification on channel with the
-- mutex name as payload, delivered at commit to the stores LISTENing on it
-- (waiters try to acquire at once instead of at the transition end).
-- Returns 1 when it ended the grant, else 0.
WITH n AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms),
u AS (
    UPDATE simba_mutex AS m SET
        owner_id      = '',
        ttl_at        = n.ms,
        transition_at = n.ms,
        version       = m.version + 1
    FROM n
    WHERE m.mutex = sqlc.arg(mutex) AND m.owner_id = sqlc.arg(owner_id) AND m.token = sqlc.arg(token)
      AND m.transition_at > n.ms
    RETURNING m.mutex
)
SELECT count(*) AS released
FROM u, LATERAL (SELECT pg_notify(sqlc.arg(channel)::text, u.mutex)) AS notified;

-- name: Get :one
-- Reads a mutex with the server's now; no row for an unknown mutex.
SELECT m.owner_id, m.token, m.ttl_at, m.transition_at,
       (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
FROM simba_mutex AS m
WHERE m.mutex = sqlc.arg(mutex);

-- name: List :many
-- Every mutex with a live grant, by name, with the server's now.
SELECT m.mutex, m.owner_id, m.token, m.ttl_at, m.transition_at,
       (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
FROM simba_mutex AS m
WHERE m.owner_id <> '' AND m.transition_at > (extract(epoch FROM clock_timestamp()) * 1000)::bigint
ORDER BY m.mutex;
