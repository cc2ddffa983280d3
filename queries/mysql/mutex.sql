-- name: Acquire :execresult
-- Every statement here decides expiry by the server's clock (a grant is
-- live while transition_at > now; an empty owner_id is a free mutex), with
-- now in epoch ms as (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000):
-- UNIX_TIMESTAMP() without argument is the statement's start in epoch
-- seconds, with no time zone involved, and the microseconds of NOW(6), the
-- same instant in the session's zone, are equal in every zone (offsets are
-- whole minutes), so the session time zone cannot shift it; both are fixed
-- for the whole statement. (sqlc v1.31's MySQL catalog does not know
-- UTC_TIMESTAMP(3), so TIMESTAMPDIFF over it cannot be used.)
-- Grants the mutex when it is free or its transition has ended (token + 1),
-- extends it when owner_id already holds a live grant (token kept), and
-- changes nothing when someone else holds it. MySQL evaluates the
-- assignments left to right and later ones see earlier results, so every
-- condition reads owner_id and transition_at before they are assigned,
-- and transition_at's own condition reads the new owner_id: after its
-- assignment, owner_id = VALUES(owner_id) exactly when the row is written.
-- VALUES(acquired_at) is this statement's now. The outcome is read back
-- with Get; RowsAffected (1 insert, 2 update, 0 unchanged, but 1 for
-- unchanged with clientFoundRows) is never trusted.
INSERT INTO simba_mutex (mutex, owner_id, acquired_at, ttl_at, transition_at, token, version)
VALUES (
    sqlc.arg(mutex), sqlc.arg(owner_id),
    (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000),
    (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(ttl_ms) AS SIGNED),
    (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(ttl_ms) AS SIGNED) + CAST(sqlc.arg(transition_ms) AS SIGNED),
    1, 1)
ON DUPLICATE KEY UPDATE
    version       = IF(owner_id = '' OR transition_at <= VALUES(acquired_at) OR owner_id = VALUES(owner_id),
                       version + 1, version),
    token         = IF(owner_id = '' OR transition_at <= VALUES(acquired_at), token + 1, token),
    acquired_at   = IF(owner_id = '' OR transition_at <= VALUES(acquired_at), VALUES(acquired_at), acquired_at),
    ttl_at        = IF(owner_id = '' OR transition_at <= VALUES(acquired_at) OR owner_id = VALUES(owner_id),
                       VALUES(ttl_at), ttl_at),
    owner_id      = IF(owner_id = '' OR transition_at <= VALUES(acquired_at) OR owner_id = VALUES(owner_id),
                       VALUES(owner_id), owner_id),
    transition_at = IF(owner_id = VALUES(owner_id), VALUES(transition_at), transition_at);

-- name: Renew :execrows
-- Extends the live grant of owner_id with token from now; 0 rows when that
-- grant is not the current one or its transition has ended. version
-- always changes, so the count is the same with or without clientFoundRows.
UPDATE simba_mutex SET
    ttl_at        = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(ttl_ms) AS SIGNED),
    transition_at = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(ttl_ms) AS SIGNED) + CAST(sqlc.arg(transition_ms) AS SIGNED),
    version       = version + 1
WHERE mutex = sqlc.arg(mutex) AND owner_id = sqlc.arg(owner_id) AND token = sqlc.arg(token)
  AND transition_at > (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000);

-- name: Release :execrows
-- Ends the live grant of owner_id with token: the mutex is free from now
-- on. The token column is kept, so the next grant's token is greater.
UPDATE simba_mutex SET
    owner_id      = '',
    ttl_at        = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000),
    transition_at = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000),
    version       = version + 1
WHERE mutex = sqlc.arg(mutex) AND owner_id = sqlc.arg(owner_id) AND token = sqlc.arg(token)
  AND transition_at > (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000);

-- name: Get :one
-- Reads a mutex with the server's now; no row for an unknown mutex.
SELECT owner_id, token, ttl_at, transition_at,
       CAST((UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) AS SIGNED) AS now_ms
FROM simba_mutex
WHERE mutex = sqlc.arg(mutex);

-- name: List :many
-- Every mutex with a live grant, by name, with the server's now.
SELECT mutex, owner_id, token, ttl_at, transition_at,
       CAST((UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) AS SIGNED) AS now_ms
FROM simba_mutex
WHERE owner_id <> '' AND transition_at > (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000)
ORDER BY mutex;
