-- Every statement here reads SQLite's clock as epoch ms,
-- CAST(unixepoch('subsec') * 1000 AS INTEGER), which is the same for the
-- whole statement, decides expiry by it (a grant is live while
-- transition_at > now; an empty owner_id is a free mutex) and returns it
-- as now_ms, so the caller reports remaining durations only. SET reads the
-- row as it was (no MySQL-style left-to-right assignment).
--
-- The wait queue (column queue, see schema/sqlite/000002): entries of 29
-- characters, oldest first, each a contender's key (16 letters a-p, wkey)
-- and the epoch ms at which the entry expires (13 digits). Keys are letters
-- and times digits, so instr(queue, wkey) only ever finds a whole key, and
-- times compare as strings. A free mutex (owner_id '') whose transition_at
-- is still ahead is reserved for the first entry: the hand-off window of
-- the last release. At most 128 entries; a loser beyond that is not queued.

-- name: Acquire :one
-- Grants the mutex when it is free or its transition has ended (a new
-- token: one more than the row's, or, for a new row, than the token
-- floor), unless it is reserved for another live waiter; extends it when
-- owner_id already holds a live grant (token kept); otherwise changes
-- nothing (no row), or, when wait_ms > 0, queues wkey (a new entry at the
-- tail, or its entry's expiry renewed in place once half of it has
-- passed). A winner leaves the queue, and takes with it a head whose
-- reservation lapsed unclaimed. Returns the row it wrote.
-- sqlc (v1.31) does not bind parameters in DO UPDATE, so the entry
-- (wkey and its expiry, now + wait_ms) travels in excluded.queue: a row
-- that exists (the statement's view is one snapshot) gets it only as
-- excluded.queue, a new row gets an empty queue.
INSERT INTO simba_mutex AS m (mutex, owner_id, acquired_at, ttl_at, transition_at, token, version, queue)
VALUES (
    sqlc.arg(mutex), sqlc.arg(owner_id),
    CAST(unixepoch('subsec') * 1000 AS INTEGER),
    CAST(unixepoch('subsec') * 1000 AS INTEGER) + CAST(sqlc.arg(ttl_ms) AS INTEGER),
    CAST(unixepoch('subsec') * 1000 AS INTEGER) + CAST(sqlc.arg(ttl_ms) AS INTEGER) + CAST(sqlc.arg(transition_ms) AS INTEGER),
    coalesce((SELECT max(g.token) FROM simba_mutex AS g WHERE g.mutex IN ('', sqlc.arg(mutex))), 0) + 1,
    1,
    CASE WHEN EXISTS (SELECT 1 FROM simba_mutex AS e WHERE e.mutex = sqlc.arg(mutex))
         THEN CAST(sqlc.arg(wkey) AS TEXT) || printf('%013d', CAST(unixepoch('subsec') * 1000 AS INTEGER) + CAST(sqlc.arg(wait_ms) AS INTEGER))
         ELSE '' END)
ON CONFLICT (mutex) DO UPDATE SET
    token         = CASE WHEN m.transition_at <= excluded.acquired_at
             OR m.owner_id = '' AND NOT (substr(m.queue, 1, 16) <> substr(excluded.queue, 1, 16) AND substr(m.queue, 17, 13) > printf('%013d', excluded.acquired_at))
                         THEN m.token + 1 ELSE m.token END,
    acquired_at   = CASE WHEN m.transition_at <= excluded.acquired_at
             OR m.owner_id = '' AND NOT (substr(m.queue, 1, 16) <> substr(excluded.queue, 1, 16) AND substr(m.queue, 17, 13) > printf('%013d', excluded.acquired_at))
                         THEN excluded.acquired_at ELSE m.acquired_at END,
    owner_id      = CASE WHEN m.transition_at <= excluded.acquired_at OR m.owner_id = excluded.owner_id
             OR m.owner_id = '' AND NOT (substr(m.queue, 1, 16) <> substr(excluded.queue, 1, 16) AND substr(m.queue, 17, 13) > printf('%013d', excluded.acquired_at))
                         THEN excluded.owner_id ELSE m.owner_id END,
    ttl_at        = CASE WHEN m.transition_at <= excluded.acquired_at OR m.owner_id = excluded.owner_id
             OR m.owner_id = '' AND NOT (substr(m.queue, 1, 16) <> substr(excluded.queue, 1, 16) AND substr(m.queue, 17, 13) > printf('%013d', excluded.acquired_at))
                         THEN excluded.ttl_at ELSE m.ttl_at END,
    transition_at = CASE WHEN m.transition_at <= excluded.acquired_at OR m.owner_id = excluded.owner_id
             OR m.owner_id = '' AND NOT (substr(m.queue, 1, 16) <> substr(excluded.queue, 1, 16) AND substr(m.queue, 17, 13) > printf('%013d', excluded.acquired_at))
                         THEN excluded.transition_at ELSE m.transition_at END,
    version       = m.version + 1,
    queue         = CASE
        WHEN m.transition_at <= excluded.acquired_at OR m.owner_id = excluded.owner_id
             OR m.owner_id = '' AND NOT (substr(m.queue, 1, 16) <> substr(excluded.queue, 1, 16) AND substr(m.queue, 17, 13) > printf('%013d', excluded.acquired_at))
        THEN replace(CASE WHEN m.owner_id = '' AND m.ttl_at < m.transition_at AND m.transition_at <= excluded.acquired_at AND substr(m.queue, 1, 16) <> substr(excluded.queue, 1, 16) THEN substr(m.queue, 30) ELSE m.queue END,
                     substr(excluded.queue, 1, 16) || substr(CASE WHEN m.owner_id = '' AND m.ttl_at < m.transition_at AND m.transition_at <= excluded.acquired_at AND substr(m.queue, 1, 16) <> substr(excluded.queue, 1, 16) THEN substr(m.queue, 30) ELSE m.queue END, instr(CASE WHEN m.owner_id = '' AND m.ttl_at < m.transition_at AND m.transition_at <= excluded.acquired_at AND substr(m.queue, 1, 16) <> substr(excluded.queue, 1, 16) THEN substr(m.queue, 30) ELSE m.queue END, substr(excluded.queue, 1, 16)) + 16, 13), '')
        WHEN instr(m.queue, substr(excluded.queue, 1, 16)) = 0
        THEN m.queue || excluded.queue
        ELSE replace(m.queue, substr(excluded.queue, 1, 16) || substr(m.queue, instr(m.queue, substr(excluded.queue, 1, 16)) + 16, 13), excluded.queue)
        END
WHERE m.transition_at <= excluded.acquired_at OR m.owner_id = excluded.owner_id
             OR m.owner_id = '' AND NOT (substr(m.queue, 1, 16) <> substr(excluded.queue, 1, 16) AND substr(m.queue, 17, 13) > printf('%013d', excluded.acquired_at))
   OR substr(excluded.queue, 17, 13) > printf('%013d', excluded.acquired_at)
      AND (instr(m.queue, substr(excluded.queue, 1, 16)) = 0 AND length(m.queue) < 3712
           OR instr(m.queue, substr(excluded.queue, 1, 16)) > 0 AND substr(m.queue, instr(m.queue, substr(excluded.queue, 1, 16)) + 16, 13) < printf('%013d', (excluded.acquired_at + CAST(substr(excluded.queue, 17, 13) AS INTEGER)) / 2))
RETURNING owner_id, token, ttl_at, transition_at, queue, CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now_ms;

-- name: Release :one
-- Ends the live grant of owner_id with token (the token column is kept, so
-- the next grant's token is greater) and withdraws wkey from the queue in
-- any case (token 0 only withdraws); up to three expired entries at the
-- head leave the queue on the way. When a release leaves live waiters, the
-- mutex is reserved for the first one for window_ms (transition_at ahead,
-- owner_id empty); so it is when the reserved head withdraws and others
-- wait. A release marks the row with acquired_at = -version, which no
-- other write leaves: released is 1 exactly when this statement ended the
-- grant. No row: nothing to end or withdraw.
UPDATE simba_mutex SET
    owner_id      = CASE WHEN owner_id = sqlc.arg(owner_id) AND token = sqlc.arg(token) AND transition_at > CAST(unixepoch('subsec') * 1000 AS INTEGER) THEN '' ELSE owner_id END,
    ttl_at        = CASE WHEN owner_id = sqlc.arg(owner_id) AND token = sqlc.arg(token) AND transition_at > CAST(unixepoch('subsec') * 1000 AS INTEGER) THEN CAST(unixepoch('subsec') * 1000 AS INTEGER) ELSE ttl_at END,
    acquired_at   = CASE WHEN owner_id = sqlc.arg(owner_id) AND token = sqlc.arg(token) AND transition_at > CAST(unixepoch('subsec') * 1000 AS INTEGER) THEN -(version + 1) ELSE acquired_at END,
    transition_at = CASE WHEN owner_id = sqlc.arg(owner_id) AND token = sqlc.arg(token) AND transition_at > CAST(unixepoch('subsec') * 1000 AS INTEGER)
                           OR owner_id = '' AND transition_at > CAST(unixepoch('subsec') * 1000 AS INTEGER) AND substr(queue, 1, 16) = CAST(sqlc.arg(wkey) AS TEXT)
                         THEN CASE WHEN substr(replace(queue, CAST(sqlc.arg(wkey) AS TEXT) || substr(queue, instr(queue, CAST(sqlc.arg(wkey) AS TEXT)) + 16, 13), ''), 1 + 29 * CASE
                      WHEN substr(replace(queue, CAST(sqlc.arg(wkey) AS TEXT) || substr(queue, instr(queue, CAST(sqlc.arg(wkey) AS TEXT)) + 16, 13), ''), 17, 13) > printf('%013d', CAST(unixepoch('subsec') * 1000 AS INTEGER)) THEN 0
                      WHEN substr(replace(queue, CAST(sqlc.arg(wkey) AS TEXT) || substr(queue, instr(queue, CAST(sqlc.arg(wkey) AS TEXT)) + 16, 13), ''), 46, 13) > printf('%013d', CAST(unixepoch('subsec') * 1000 AS INTEGER)) THEN 1
                      WHEN substr(replace(queue, CAST(sqlc.arg(wkey) AS TEXT) || substr(queue, instr(queue, CAST(sqlc.arg(wkey) AS TEXT)) + 16, 13), ''), 75, 13) > printf('%013d', CAST(unixepoch('subsec') * 1000 AS INTEGER)) THEN 2
                      ELSE 3 END) <> ''
                                   THEN CAST(unixepoch('subsec') * 1000 AS INTEGER) + CAST(sqlc.arg(window_ms) AS INTEGER) ELSE CAST(unixepoch('subsec') * 1000 AS INTEGER) END
                         ELSE transition_at END,
    queue         = substr(replace(queue, CAST(sqlc.arg(wkey) AS TEXT) || substr(queue, instr(queue, CAST(sqlc.arg(wkey) AS TEXT)) + 16, 13), ''), 1 + 29 * CASE
                      WHEN substr(replace(queue, CAST(sqlc.arg(wkey) AS TEXT) || substr(queue, instr(queue, CAST(sqlc.arg(wkey) AS TEXT)) + 16, 13), ''), 17, 13) > printf('%013d', CAST(unixepoch('subsec') * 1000 AS INTEGER)) THEN 0
                      WHEN substr(replace(queue, CAST(sqlc.arg(wkey) AS TEXT) || substr(queue, instr(queue, CAST(sqlc.arg(wkey) AS TEXT)) + 16, 13), ''), 46, 13) > printf('%013d', CAST(unixepoch('subsec') * 1000 AS INTEGER)) THEN 1
                      WHEN substr(replace(queue, CAST(sqlc.arg(wkey) AS TEXT) || substr(queue, instr(queue, CAST(sqlc.arg(wkey) AS TEXT)) + 16, 13), ''), 75, 13) > printf('%013d', CAST(unixepoch('subsec') * 1000 AS INTEGER)) THEN 2
                      ELSE 3 END),
    version       = version + 1
WHERE mutex = sqlc.arg(mutex)
  AND (owner_id = sqlc.arg(owner_id) AND token = sqlc.arg(token) AND transition_at > CAST(unixepoch('subsec') * 1000 AS INTEGER) OR instr(queue, CAST(sqlc.arg(wkey) AS TEXT)) > 0)
RETURNING CAST(acquired_at = -version AS INTEGER) AS released;

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

-- name: RenewBatch :many
-- Renews, as Renew, every live grant named in grants (mutex, NUL,
-- owner_id, NUL, token in decimal) of the mutexes listed, and returns the
-- renewed rows; GetMany reads the others.
UPDATE simba_mutex SET
    ttl_at        = CAST(unixepoch('subsec') * 1000 AS INTEGER) + CAST(sqlc.arg(ttl_ms) AS INTEGER),
    transition_at = CAST(unixepoch('subsec') * 1000 AS INTEGER) + CAST(sqlc.arg(ttl_ms) AS INTEGER) + CAST(sqlc.arg(transition_ms) AS INTEGER),
    version       = version + 1
WHERE mutex IN (sqlc.slice(mutexes))
  AND grant_key IN (sqlc.slice(grants))
  AND transition_at > CAST(unixepoch('subsec') * 1000 AS INTEGER)
RETURNING mutex, owner_id, token, ttl_at, transition_at, CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now_ms;

-- name: Get :one
-- Reads a mutex with the clock's now; no row for an unknown mutex.
SELECT owner_id, token, ttl_at, transition_at, queue, CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now_ms
FROM simba_mutex
WHERE mutex = sqlc.arg(mutex);

-- name: GetMany :many
-- Reads the listed mutexes with the clock's now.
SELECT mutex, owner_id, token, ttl_at, transition_at, queue, CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now_ms
FROM simba_mutex
WHERE mutex IN (sqlc.slice(mutexes));

-- name: List :many
-- Every mutex with an owner whose transition has not ended, by name, with
-- the clock's now.
SELECT mutex, owner_id, token, ttl_at, transition_at, CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now_ms
FROM simba_mutex
WHERE owner_id <> '' AND transition_at > CAST(unixepoch('subsec') * 1000 AS INTEGER)
ORDER BY mutex;

-- name: RaiseFloor :one
-- The first half of a prune: raises the token floor (the row whose mutex
-- is '') to the highest token of the rows free for retention_ms or longer
-- (their transition, or the hand-off window of their release, ended that
-- long ago), and returns the floor; no row when no row was free for so
-- long.
INSERT INTO simba_mutex AS m (mutex, token)
SELECT '', f.top
FROM (SELECT max(p.token) AS top FROM simba_mutex AS p
      WHERE p.mutex <> '' AND p.transition_at <= CAST(unixepoch('subsec') * 1000 AS INTEGER) - CAST(sqlc.arg(retention_ms) AS INTEGER)) AS f
WHERE f.top IS NOT NULL
ON CONFLICT (mutex) DO UPDATE SET token = max(m.token, excluded.token), version = m.version + 1
RETURNING token;

-- name: Prune :execrows
-- The second half: deletes at most max_rows rows free for retention_ms or
-- longer whose token is at most floor, the value RaiseFloor returned (a row
-- freed since has a token the floor may not cover yet: it stays).
DELETE FROM simba_mutex
WHERE mutex IN (SELECT p.mutex FROM simba_mutex AS p
                WHERE p.mutex <> '' AND p.transition_at <= CAST(unixepoch('subsec') * 1000 AS INTEGER) - CAST(sqlc.arg(retention_ms) AS INTEGER)
                  AND p.token <= CAST(sqlc.arg(floor) AS INTEGER)
                LIMIT CAST(sqlc.arg(max_rows) AS INTEGER));

-- name: ListPage :many
-- At most max_rows mutexes with an owner whose transition has not ended
-- and whose names sort after after_mutex, by name, with the clock's now:
-- one page of a listing.
SELECT mutex, owner_id, token, ttl_at, transition_at, CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now_ms
FROM simba_mutex
WHERE mutex > sqlc.arg(after_mutex) AND owner_id <> ''
  AND transition_at > CAST(unixepoch('subsec') * 1000 AS INTEGER)
ORDER BY mutex
LIMIT CAST(sqlc.arg(max_rows) AS INTEGER);
