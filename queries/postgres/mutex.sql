-- Every statement here reads the server's clock once (clock_timestamp() in
-- the CTE n), decides expiry by it (a grant is live while
-- transition_at > now; an empty owner_id is a free mutex) and returns it
-- as now_ms, so the caller reports remaining durations only.
--
-- The wait queue (column queue, see schema/postgres/000002): entries of
-- 29 characters, oldest first, each a contender's key (16 letters a-p,
-- wkey) and the epoch ms at which the entry expires (13 digits). Keys are
-- letters and times digits, so position(wkey IN queue) only ever finds a
-- whole key, and times compare as strings. A free mutex (owner_id '')
-- whose transition_at is still ahead is reserved for the first entry: the
-- hand-off window of the last release. At most 128 entries (3712
-- characters); a loser beyond that is not queued.

-- name: Acquire :one
-- Grants the mutex when it is free or its transition has ended (a new
-- token: one more than the row's, or, for a new row, than the token floor
-- and than the row as the statement's snapshot may still see it, so that
-- a prune in between cannot lower it), unless it is reserved for another
-- live waiter; extends it when owner_id already holds a live grant (token
-- kept); otherwise changes nothing, or, when wait_ms > 0, queues wkey (a
-- new entry at the tail, or its entry's expiry renewed in place once half
-- of it has passed). A winner leaves the queue, and takes with it a head
-- whose reservation lapsed unclaimed. Returns the row it wrote, or, when
-- it wrote none, the row as the statement's snapshot saw it; no row when
-- the mutex was inserted by a transaction the snapshot does not see.
-- The floor and the row are read by two lookups on the key, not one
-- `mutex IN ('', $1)`: a connection keeps the plan it made when the table
-- was small, and for that IN it is a sequential scan, which then costs in
-- proportion to the number of locks (TestPlansStayOnTheIndex).
WITH n AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms),
up AS (
    INSERT INTO simba_mutex AS m (mutex, owner_id, acquired_at, ttl_at, transition_at, token, version, queue)
    SELECT sqlc.arg(mutex)::varchar, sqlc.arg(owner_id)::varchar, n.ms,
           n.ms + sqlc.arg(ttl_ms)::bigint, n.ms + sqlc.arg(ttl_ms)::bigint + sqlc.arg(transition_ms)::bigint,
           greatest(coalesce((SELECT f.token FROM simba_mutex AS f WHERE f.mutex = ''), 0),
                    coalesce((SELECT g.token FROM simba_mutex AS g WHERE g.mutex = sqlc.arg(mutex)::varchar), 0)) + 1,
           1, ''
    FROM n
    ON CONFLICT (mutex) DO UPDATE SET
        token         = CASE WHEN m.transition_at <= EXCLUDED.acquired_at
                 OR m.owner_id = '' AND NOT (left(m.queue, 16) <> sqlc.arg(wkey)::text AND substr(m.queue, 17, 13) > lpad(EXCLUDED.acquired_at::text, 13, '0'))
                             THEN m.token + 1 ELSE m.token END,
        acquired_at   = CASE WHEN m.transition_at <= EXCLUDED.acquired_at
                 OR m.owner_id = '' AND NOT (left(m.queue, 16) <> sqlc.arg(wkey)::text AND substr(m.queue, 17, 13) > lpad(EXCLUDED.acquired_at::text, 13, '0'))
                             THEN EXCLUDED.acquired_at ELSE m.acquired_at END,
        owner_id      = CASE WHEN m.transition_at <= EXCLUDED.acquired_at OR m.owner_id = EXCLUDED.owner_id
                 OR m.owner_id = '' AND NOT (left(m.queue, 16) <> sqlc.arg(wkey)::text AND substr(m.queue, 17, 13) > lpad(EXCLUDED.acquired_at::text, 13, '0'))
                             THEN EXCLUDED.owner_id ELSE m.owner_id END,
        ttl_at        = CASE WHEN m.transition_at <= EXCLUDED.acquired_at OR m.owner_id = EXCLUDED.owner_id
                 OR m.owner_id = '' AND NOT (left(m.queue, 16) <> sqlc.arg(wkey)::text AND substr(m.queue, 17, 13) > lpad(EXCLUDED.acquired_at::text, 13, '0'))
                             THEN EXCLUDED.ttl_at ELSE m.ttl_at END,
        transition_at = CASE WHEN m.transition_at <= EXCLUDED.acquired_at OR m.owner_id = EXCLUDED.owner_id
                 OR m.owner_id = '' AND NOT (left(m.queue, 16) <> sqlc.arg(wkey)::text AND substr(m.queue, 17, 13) > lpad(EXCLUDED.acquired_at::text, 13, '0'))
                             THEN EXCLUDED.transition_at ELSE m.transition_at END,
        version       = m.version + 1,
        queue         = CASE
            WHEN m.transition_at <= EXCLUDED.acquired_at OR m.owner_id = EXCLUDED.owner_id
                 OR m.owner_id = '' AND NOT (left(m.queue, 16) <> sqlc.arg(wkey)::text AND substr(m.queue, 17, 13) > lpad(EXCLUDED.acquired_at::text, 13, '0'))
            THEN replace(CASE WHEN m.owner_id = '' AND m.ttl_at < m.transition_at AND m.transition_at <= EXCLUDED.acquired_at AND left(m.queue, 16) <> sqlc.arg(wkey)::text THEN substr(m.queue, 30) ELSE m.queue END,
                         sqlc.arg(wkey)::text || substr(CASE WHEN m.owner_id = '' AND m.ttl_at < m.transition_at AND m.transition_at <= EXCLUDED.acquired_at AND left(m.queue, 16) <> sqlc.arg(wkey)::text THEN substr(m.queue, 30) ELSE m.queue END, position(sqlc.arg(wkey)::text IN CASE WHEN m.owner_id = '' AND m.ttl_at < m.transition_at AND m.transition_at <= EXCLUDED.acquired_at AND left(m.queue, 16) <> sqlc.arg(wkey)::text THEN substr(m.queue, 30) ELSE m.queue END) + 16, 13), '')
            WHEN position(sqlc.arg(wkey)::text IN m.queue) = 0
            THEN m.queue || sqlc.arg(wkey)::text || lpad((EXCLUDED.acquired_at + sqlc.arg(wait_ms)::bigint)::text, 13, '0')
            ELSE replace(m.queue, sqlc.arg(wkey)::text || substr(m.queue, position(sqlc.arg(wkey)::text IN m.queue) + 16, 13), sqlc.arg(wkey)::text || lpad((EXCLUDED.acquired_at + sqlc.arg(wait_ms)::bigint)::text, 13, '0'))
            END
    WHERE m.transition_at <= EXCLUDED.acquired_at OR m.owner_id = EXCLUDED.owner_id
                 OR m.owner_id = '' AND NOT (left(m.queue, 16) <> sqlc.arg(wkey)::text AND substr(m.queue, 17, 13) > lpad(EXCLUDED.acquired_at::text, 13, '0'))
       OR sqlc.arg(wait_ms)::bigint > 0
          AND (position(sqlc.arg(wkey)::text IN m.queue) = 0 AND length(m.queue) < 3712
               OR position(sqlc.arg(wkey)::text IN m.queue) > 0 AND substr(m.queue, position(sqlc.arg(wkey)::text IN m.queue) + 16, 13) < lpad((EXCLUDED.acquired_at + sqlc.arg(wait_ms)::bigint / 2)::text, 13, '0'))
    RETURNING m.owner_id, m.token, m.ttl_at, m.transition_at, m.queue
)
SELECT up.owner_id, up.token, up.ttl_at, up.transition_at, up.queue, (SELECT n.ms FROM n)::bigint AS now_ms
FROM up
UNION ALL
SELECT s.owner_id, s.token, s.ttl_at, s.transition_at, s.queue, (SELECT n.ms FROM n)::bigint AS now_ms
FROM simba_mutex AS s
WHERE s.mutex = sqlc.arg(mutex) AND NOT EXISTS (SELECT 1 FROM up);

-- name: AcquireHead :one
-- Acquire's grant for the first waiter of a free mutex: a plain single-row
-- UPDATE that grants owner_id when the mutex is free (held back for the
-- first waiter, or its window lapsed) and wkey heads the queue, as Acquire
-- would (a new token: one more than the row's; the head entry leaves the
-- queue), and changes nothing otherwise. No row: the caller is not first,
-- or the mutex is held or gone, and the caller runs Acquire. A waiter woken
-- by a hand-off is almost always first, and its acquire is on the
-- hand-off's critical path; Acquire evaluates its upsert's every branch.
WITH n AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms)
UPDATE simba_mutex AS m SET
    token         = m.token + 1,
    version       = m.version + 1,
    acquired_at   = n.ms,
    ttl_at        = n.ms + sqlc.arg(ttl_ms)::bigint,
    transition_at = n.ms + sqlc.arg(ttl_ms)::bigint + sqlc.arg(transition_ms)::bigint,
    owner_id      = sqlc.arg(owner_id)::varchar,
    queue         = substr(m.queue, 30)
FROM n
WHERE m.mutex = sqlc.arg(mutex) AND m.owner_id = '' AND left(m.queue, 16) = sqlc.arg(wkey)::text
RETURNING m.token, m.ttl_at, m.transition_at, m.queue, n.ms AS now_ms;

-- name: ReleaseHead :one
-- Release's common case under contention in a plain single-row UPDATE:
-- ends the live grant of owner_id with token when wkey is not queued and
-- the queue is empty or its first entry is live, writing what Release
-- writes then (the mutex reserved for the first waiter for window_ms, or
-- free at once when nobody waits) and notifying as Release does (on
-- channel, unless it is ''), or, with let_go, letting every advisory lock
-- of the session go after the row is written (its doorbell). It leaves
-- expired entries behind the first one in the queue: they leave it when
-- they come first (then Release decides), or with their owner. No row:
-- the grant is not the current one, wkey is queued or the first entry
-- expired; then Release decides. Release cuts the queue into its entries
-- with a regexp; this statement costs about 60 % of it run cold, as a
-- hand-off runs it (175-205 against 290-335 µs on a private server, each
-- statement after 1 ms idle).
WITH n AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms,
                  sqlc.arg(window_ms)::bigint AS win, sqlc.arg(channel)::text AS channel,
                  sqlc.arg(let_go)::boolean AS let_go, sqlc.arg(mutex)::varchar AS mutex)
UPDATE simba_mutex AS m SET
    owner_id      = '',
    ttl_at        = n.ms,
    transition_at = CASE WHEN m.queue = '' THEN n.ms ELSE n.ms + n.win END,
    version       = m.version + 1
FROM n
WHERE m.mutex = n.mutex AND m.owner_id = sqlc.arg(owner_id) AND m.token = sqlc.arg(token)
  AND m.transition_at > n.ms AND position(sqlc.arg(wkey)::text IN m.queue) = 0
  AND (m.queue = '' OR substr(m.queue, 17, 13) > lpad(n.ms::text, 13, '0'))
RETURNING m.token,
    (SELECT count(*)
     FROM (SELECT DISTINCT left(e.k, 8) AS tag
           FROM (VALUES (left(m.queue, 16)), (substr(m.queue, 30, 16))) AS e(k)
           WHERE e.k <> '') AS t,
          LATERAL (SELECT pg_notify(n.channel || '_' || t.tag,
                                    left(m.queue, 16) || rpad(substr(m.queue, 30, 16), 16, '-')
                                    || n.win::text || ':' || n.mutex::text)
                   WHERE n.channel <> '') AS z)::bigint AS notified,
    (SELECT count(*) FROM (SELECT pg_advisory_unlock_all() WHERE n.let_go) AS u)::bigint AS let_go;

-- name: Release :one
-- Ends the live grant of owner_id with token (the token column is kept, so
-- the next grant's token is greater) and withdraws wkey from the queue in
-- any case (token 0 only withdraws). Expired entries leave the queue on the
-- way. When a release leaves live waiters, the mutex is reserved for the
-- first one for window_ms (transition_at ahead, owner_id empty), and a
-- notification on channel (none when channel is '') names it and the next
-- one: "HEAD" "NEXT" (16 letters each; dashes when there is no next)
-- window_ms ":" mutex. So does a withdrawal by the reserved head when
-- others wait. Nobody waiting, no notification: a notifying commit
-- serializes on a server-wide lock. Returns released (1 when the grant
-- ended) and notified. With let_go, run on the connection that holds
-- owner_id's doorbell (WithPostgresDoorbells), a release that ended the
-- grant also lets every advisory lock of the session go (let_go 1), which
-- wakes the next waiter without a statement of its own; its acquire then
-- waits for the row lock until this statement commits, and sees the
-- release. The queue is cut into its entries once, by one regexp_matches
-- pass: substr on a UTF-8 text counts characters from its start, so
-- cutting entry i out with substr cost in proportion to i, and the
-- release in proportion to the square of the queue's length (0.91 ms with
-- 31 waiters queued, against 0.33 ms with 7; one pass: 0.33 ms for both).
WITH n AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms,
                  sqlc.arg(window_ms)::bigint AS win, sqlc.arg(wkey)::text AS wkey),
rel AS (
    UPDATE simba_mutex AS m SET
        (owner_id, ttl_at, transition_at, queue, version) = (
            SELECT '', n.ms, CASE WHEN f.q <> '' THEN n.ms + n.win ELSE n.ms END, f.q, m.version + 1
            FROM (SELECT coalesce(string_agg(r.e[1], '' ORDER BY r.i), '') AS q
                  FROM regexp_matches(m.queue, '.{29}', 'g') WITH ORDINALITY AS r(e, i)
                  WHERE substr(r.e[1], 17, 13) > lpad(n.ms::text, 13, '0') AND left(r.e[1], 16) <> n.wkey) AS f)
    FROM n
    WHERE m.mutex = sqlc.arg(mutex) AND m.owner_id = sqlc.arg(owner_id) AND m.token = sqlc.arg(token)
      AND m.transition_at > n.ms
    RETURNING m.queue, m.transition_at = n.ms + sqlc.arg(window_ms)::bigint AS fresh
),
wd AS (
    UPDATE simba_mutex AS m SET
        (transition_at, queue, version) = (
            SELECT CASE WHEN m.owner_id = '' AND m.transition_at > n.ms AND left(m.queue, 16) = n.wkey
                        THEN CASE WHEN f.q <> '' THEN n.ms + n.win ELSE n.ms END
                        ELSE m.transition_at END,
                   f.q, m.version + 1
            FROM (SELECT coalesce(string_agg(r.e[1], '' ORDER BY r.i), '') AS q
                  FROM regexp_matches(m.queue, '.{29}', 'g') WITH ORDINALITY AS r(e, i)
                  WHERE substr(r.e[1], 17, 13) > lpad(n.ms::text, 13, '0') AND left(r.e[1], 16) <> n.wkey) AS f)
    FROM n
    WHERE m.mutex = sqlc.arg(mutex) AND position(sqlc.arg(wkey)::text IN m.queue) > 0 AND NOT EXISTS (SELECT 1 FROM rel)
    RETURNING m.queue, m.owner_id = '' AND m.transition_at = n.ms + sqlc.arg(window_ms)::bigint AS fresh
)
SELECT (SELECT count(*) FROM rel)::bigint AS released,
       (SELECT count(*)
        FROM (SELECT r.queue, r.fresh FROM rel AS r UNION ALL SELECT w.queue, w.fresh FROM wd AS w) AS x,
             LATERAL (SELECT DISTINCT left(e.k, 8) AS tag
                      FROM (VALUES (left(x.queue, 16)), (substr(x.queue, 30, 16))) AS e(k)
                      WHERE e.k <> '') AS t,
             LATERAL (SELECT pg_notify(sqlc.arg(channel)::text || '_' || t.tag,
                                       left(x.queue, 16) || rpad(substr(x.queue, 30, 16), 16, '-')
                                       || sqlc.arg(window_ms)::bigint::text || ':' || sqlc.arg(mutex)::text)
                      WHERE x.fresh AND x.queue <> '' AND sqlc.arg(channel)::text <> '') AS notified
       )::bigint AS notified,
       (SELECT count(*)
        FROM rel AS r, LATERAL (SELECT pg_advisory_unlock_all() WHERE sqlc.arg(let_go)::boolean) AS u
       )::bigint AS let_go;

-- name: ReleaseIdle :one
-- Release's common case in a cheaper statement: ends the live grant of
-- owner_id with token when nobody is queued (queue empty), writing what
-- Release writes then (the lock free at once, no notification). No row
-- when the grant is not the current one or someone is queued: then
-- Release decides.
WITH n AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms)
UPDATE simba_mutex AS m SET
    owner_id      = '',
    ttl_at        = n.ms,
    transition_at = n.ms,
    version       = m.version + 1
FROM n
WHERE m.mutex = sqlc.arg(mutex) AND m.owner_id = sqlc.arg(owner_id) AND m.token = sqlc.arg(token)
  AND m.transition_at > n.ms AND m.queue = ''
RETURNING m.token;

-- name: Renew :one
-- Extends the live grant of owner_id with token from now, and returns the
-- queue (a holder learns of waiters); no row when that grant is not the
-- current one or its transition has ended.
WITH n AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms)
UPDATE simba_mutex AS m SET
    ttl_at        = n.ms + sqlc.arg(ttl_ms)::bigint,
    transition_at = n.ms + sqlc.arg(ttl_ms)::bigint + sqlc.arg(transition_ms)::bigint,
    version       = m.version + 1
FROM n
WHERE m.mutex = sqlc.arg(mutex) AND m.owner_id = sqlc.arg(owner_id) AND m.token = sqlc.arg(token)
  AND m.transition_at > n.ms
RETURNING m.owner_id, m.token, m.ttl_at, m.transition_at, m.queue, n.ms AS now_ms;

-- name: RenewMany :many
-- Renews, as Renew, each grant of batch: a JSON array of objects with
-- mutex, owner_id, token, ttl_ms and transition_ms. Returns one row per
-- element: renewed, and the row after the renewal, or as the statement's
-- snapshot saw it when the grant was not renewed (owner_id empty for an
-- unknown mutex).
WITH n AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms),
r AS (
    SELECT (e.value ->> 'mutex')::text AS mutex, (e.value ->> 'owner_id')::text AS owner_id,
           (e.value ->> 'token')::bigint AS token, (e.value ->> 'ttl_ms')::bigint AS ttl_ms,
           (e.value ->> 'transition_ms')::bigint AS transition_ms
    FROM jsonb_array_elements(sqlc.arg(batch)::jsonb) AS e
),
u AS (
    UPDATE simba_mutex AS m SET
        ttl_at        = n.ms + r.ttl_ms,
        transition_at = n.ms + r.ttl_ms + r.transition_ms,
        version       = m.version + 1
    FROM n, r
    WHERE m.mutex = r.mutex AND m.owner_id = r.owner_id AND m.token = r.token AND m.transition_at > n.ms
    RETURNING m.mutex, m.owner_id, m.token, m.ttl_at, m.transition_at, m.queue
)
SELECT r.mutex::text AS mutex, (u.mutex IS NOT NULL)::boolean AS renewed,
       coalesce(u.owner_id, s.owner_id, '')::text AS owner_id, coalesce(u.token, s.token, 0)::bigint AS token,
       coalesce(u.ttl_at, s.ttl_at, 0)::bigint AS ttl_at, coalesce(u.transition_at, s.transition_at, 0)::bigint AS transition_at,
       coalesce(u.queue, s.queue, '')::text AS queue,
       (SELECT n.ms FROM n)::bigint AS now_ms
FROM r
LEFT JOIN u ON u.mutex = r.mutex
LEFT JOIN simba_mutex AS s ON s.mutex = r.mutex;

-- name: Get :one
-- Reads a mutex with the server's now; no row for an unknown mutex.
SELECT m.owner_id, m.token, m.ttl_at, m.transition_at, m.queue,
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

-- name: Prune :one
-- Deletes at most max_rows rows that have been free for retention_ms or
-- longer (their transition, or the hand-off window of their release, ended
-- that long ago) and, in the same transaction, raises the token floor (the
-- row whose mutex is '') to their highest token: a name whose row is
-- deleted starts again above every token it had. Returns how many rows it
-- deleted.
WITH n AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms),
d AS (
    DELETE FROM simba_mutex AS m
    USING n
    WHERE m.mutex IN (SELECT p.mutex FROM simba_mutex AS p, n
                      WHERE p.mutex <> '' AND p.transition_at <= n.ms - sqlc.arg(retention_ms)::bigint
                      LIMIT sqlc.arg(max_rows)::bigint)
      AND m.mutex <> '' AND m.transition_at <= n.ms - sqlc.arg(retention_ms)::bigint
    RETURNING m.token
),
f AS (
    INSERT INTO simba_mutex AS m (mutex, token)
    SELECT '', max(d.token) FROM d HAVING count(*) > 0
    ON CONFLICT (mutex) DO UPDATE SET token = greatest(m.token, EXCLUDED.token), version = m.version + 1
)
SELECT count(*)::bigint AS pruned FROM d;

-- name: ListPage :many
-- At most max_rows mutexes with a live grant whose names sort after
-- after_mutex, by name, with the server's now: one page of a listing.
SELECT m.mutex, m.owner_id, m.token, m.ttl_at, m.transition_at,
       (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
FROM simba_mutex AS m
WHERE m.mutex > sqlc.arg(after_mutex)::varchar AND m.owner_id <> ''
  AND m.transition_at > (extract(epoch FROM clock_timestamp()) * 1000)::bigint
ORDER BY m.mutex
LIMIT sqlc.arg(max_rows)::bigint;
