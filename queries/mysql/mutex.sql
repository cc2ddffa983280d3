-- Every statement here decides expiry by the server's clock (a grant is
-- live while transition_at > now; an empty owner_id is a free mutex), with
-- now in epoch ms as (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000):
-- UNIX_TIMESTAMP() without argument is the statement's start in epoch
-- seconds, with no time zone involved, and the microseconds of NOW(6), the
-- same instant in the session's zone, are equal in every zone (offsets are
-- whole minutes), so the session time zone cannot shift it; both are fixed
-- for the whole statement. (sqlc v1.31's MySQL catalog does not know
-- UTC_TIMESTAMP(3), so TIMESTAMPDIFF over it cannot be used.)
--
-- The wait queue (column queue, see schema/mysql/000002): entries of 29
-- bytes, oldest first, each a contender's key (16 letters a-p, wkey) and
-- the epoch ms at which the entry expires (13 digits). Keys are letters and
-- times digits, so LOCATE(wkey, queue) only ever finds a whole key (a key
-- is queued at most once: a queued key's entry is renewed in place), and
-- times compare as strings. A free mutex (owner_id '') whose transition_at
-- is still ahead is reserved for the first entry: the hand-off window of
-- the last release. At most 128 entries; a loser beyond that is not queued.
--
-- MySQL evaluates the assignments of an UPDATE (and of ON DUPLICATE KEY
-- UPDATE) left to right, later ones seeing earlier results. So the first
-- assignment decides, from the row as it was, what the statement does and
-- keeps the decision in LAST_INSERT_ID(decision), which the later
-- assignments read back with LAST_INSERT_ID() (the value is the session's
-- at once); the client also gets the last value set in the reply (the OK
-- packet's insert id).

-- name: Acquire :execresult
-- Grants the mutex when it is free or its transition has ended (a new
-- token: one more than the row's, or, for a new row, than the token floor,
-- read with a shared lock so that a prune, which raises the floor before it
-- deletes a row, either came before this statement or waits for it; only
-- the floor row is read, so a new name takes no gap lock), unless it is
-- reserved for another live waiter;
-- extends it when owner_id already holds a live grant (token kept);
-- otherwise changes nothing, or, when enqueue is 1, queues wkey (a new
-- entry at the tail, expiring 2 × (ttl + transition) from now, or its
-- entry's expiry renewed in place once half of that has passed). A winner
-- leaves the queue, and takes with it a head whose reservation lapsed
-- unclaimed. The decision: 3 grant, 4 grant after a lapsed reservation, 2
-- extension, 1 lost and queued (a new entry, or its entry renewed), 0 lost
-- and nothing changed; so a later assignment tests it with one comparison
-- (above 2: a new token; above 1: owner_id holds the mutex). It is kept
-- by the token's assignment, the first. The statement is written small:
-- the server resolves every expression of it again on each execution
-- (fix_fields, prepared or not), whichever branch runs, so its cost grows
-- with its text. So the decision and the enqueue condition are written
-- once (a second copy cost about a tenth of the server CPU of an
-- uncontended acquire + release, on MariaDB 10.11), version is assigned
-- once, and an entry is changed where LOCATE found it (INSERT, which
-- returns the queue unchanged at position 0: wkey not queued), not built
-- again to be found by REPLACE (with the codes above, 5 to 7% less server
-- CPU per cycle). The lapsed-reservation test does not look at the head's
-- key: when the winner is the head, dropping the head is its leaving. A
-- user variable (@x := ...) carrying a value from one assignment to the
-- next cost more than the copies it saved. The reply's
-- insert id is the token when owner_id holds the mutex after the
-- statement, else 0.
-- sqlc (v1.31) binds no parameter in ON DUPLICATE KEY UPDATE, so wkey and
-- enqueue travel in VALUES(queue): wkey and now + enqueue as an entry,
-- which expires within a millisecond. A new row (the caller holds it)
-- starts with that entry; it leaves with the holder's release, or expires.
-- MariaDB runs the statement with a RETURNING clause (added by sqlstore:
-- sqlc's MySQL parser has none) that returns the row in the same round
-- trip; MySQL reads a lost attempt back with Get. RowsAffected (1 insert,
-- 2 update, 0 unchanged, but 1 for unchanged with clientFoundRows) is
-- never trusted.
INSERT INTO simba_mutex (mutex, simba_mutex.owner_id, simba_mutex.acquired_at, simba_mutex.ttl_at, simba_mutex.transition_at, simba_mutex.token, simba_mutex.version, simba_mutex.queue)
VALUES (
    sqlc.arg(mutex), sqlc.arg(owner_id),
    (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000),
    (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(ttl_ms) AS SIGNED),
    (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(ttl_ms) AS SIGNED) + CAST(sqlc.arg(transition_ms) AS SIGNED),
    LAST_INSERT_ID((SELECT COALESCE(MAX(f.token), 0) + 1
                    FROM (SELECT g.token FROM simba_mutex AS g WHERE g.mutex = '' LOCK IN SHARE MODE) AS f)),
    1,
    CONCAT(CAST(sqlc.arg(wkey) AS BINARY), LPAD((UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(enqueue) AS SIGNED), 13, '0')))
ON DUPLICATE KEY UPDATE
    simba_mutex.token         = simba_mutex.token
                    + (LAST_INSERT_ID(IF(simba_mutex.transition_at <= VALUES(acquired_at)
                      OR simba_mutex.owner_id = '' AND NOT (LEFT(simba_mutex.queue, 16) <> LEFT(VALUES(queue), 16) AND SUBSTRING(simba_mutex.queue, 17, 13) > LPAD(VALUES(acquired_at), 13, '0')),
                   IF(simba_mutex.owner_id = '' AND simba_mutex.ttl_at < simba_mutex.transition_at AND simba_mutex.transition_at <= VALUES(acquired_at), 4, 3),
                   IF(simba_mutex.owner_id = VALUES(owner_id), 2,
                   IF(SUBSTRING(VALUES(queue), 17, 13) > LPAD(VALUES(acquired_at), 13, '0')
                   AND IF(LOCATE(LEFT(VALUES(queue), 16), simba_mutex.queue) = 0, LENGTH(simba_mutex.queue) < 3712,
                          SUBSTRING(simba_mutex.queue, LOCATE(LEFT(VALUES(queue), 16), simba_mutex.queue) + 16, 13) < LPAD(VALUES(acquired_at) + LEAST(2 * (VALUES(transition_at) - VALUES(acquired_at)), 2592000000) DIV 2, 13, '0')), 1, 0)))) > 2),
    simba_mutex.acquired_at   = IF(LAST_INSERT_ID() > 2, VALUES(acquired_at), simba_mutex.acquired_at),
    simba_mutex.ttl_at        = IF(LAST_INSERT_ID() > 1, VALUES(ttl_at), simba_mutex.ttl_at),
    simba_mutex.transition_at = IF(LAST_INSERT_ID() > 1, VALUES(transition_at), simba_mutex.transition_at),
    simba_mutex.owner_id      = IF(LAST_INSERT_ID() > 1, VALUES(owner_id), simba_mutex.owner_id),
    simba_mutex.queue         = IF(LAST_INSERT_ID() = 4, SUBSTRING(simba_mutex.queue, 30), simba_mutex.queue),
    simba_mutex.queue         = IF(LAST_INSERT_ID() = 1,
                       IF(LOCATE(LEFT(VALUES(queue), 16), simba_mutex.queue) = 0, CONCAT(simba_mutex.queue, LEFT(VALUES(queue), 16), LPAD(VALUES(acquired_at) + LEAST(2 * (VALUES(transition_at) - VALUES(acquired_at)), 2592000000), 13, '0')),
                          INSERT(simba_mutex.queue, LOCATE(LEFT(VALUES(queue), 16), simba_mutex.queue) + 16, 13, LPAD(VALUES(acquired_at) + LEAST(2 * (VALUES(transition_at) - VALUES(acquired_at)), 2592000000), 13, '0'))),
                       IF(LAST_INSERT_ID() > 0, INSERT(simba_mutex.queue, LOCATE(LEFT(VALUES(queue), 16), simba_mutex.queue), 29, ''), simba_mutex.queue)),
    simba_mutex.version       = simba_mutex.version + (LAST_INSERT_ID() > 0) + 0 * LAST_INSERT_ID(IF(LAST_INSERT_ID() > 1, simba_mutex.token, 0));

-- name: AcquireFree :execresult
-- Acquire's grant for a mutex this Store last saw free with nobody queued
-- (its own ReleaseIdle ended the grant): a plain single-row UPDATE that
-- grants only when nobody is queued and the mutex is free or its
-- transition has ended, as Acquire would (a new token: one more than the
-- row's), and changes nothing otherwise. The reply's insert id is the new
-- token. 0 rows: the mutex is held, reserved, queued for or gone, and the
-- caller runs Acquire, which tells these apart. Acquire resolves all of
-- its expressions on every execution, whichever branch runs; this costs
-- the server about two fifths less CPU per uncontended cycle on MariaDB
-- 10.11 (with ReleaseIdle: 126 against 213 µs on a loaded machine).
UPDATE simba_mutex SET
    token         = LAST_INSERT_ID(token + 1),
    version       = version + 1,
    acquired_at   = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000),
    ttl_at        = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(ttl_ms) AS SIGNED),
    transition_at = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(ttl_ms) AS SIGNED) + CAST(sqlc.arg(transition_ms) AS SIGNED),
    owner_id      = sqlc.arg(owner_id)
WHERE mutex = sqlc.arg(mutex) AND queue = ''
  AND (owner_id = '' OR transition_at <= (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000));

-- name: AcquireHead :execresult
-- Acquire's grant for the first waiter of a free mutex: a plain
-- single-row UPDATE that grants owner_id, when the mutex is free (held
-- back for the first waiter, or its window lapsed) and wkey heads the
-- queue, as Acquire would (a new token: one more than the row's; the head
-- entry leaves the queue), and changes nothing otherwise. The reply's
-- insert id is the new token. 0 rows: the caller is not first, or the
-- mutex is held or gone, and the caller runs Acquire. A waiter woken by
-- its doorbell is almost always first; this is its acquire in half the
-- server time of Acquire (prepared, MariaDB 10.11: 86 against 158 µs a
-- call).
UPDATE simba_mutex SET
    token         = LAST_INSERT_ID(token + 1),
    version       = version + 1,
    acquired_at   = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000),
    ttl_at        = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(ttl_ms) AS SIGNED),
    transition_at = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(ttl_ms) AS SIGNED) + CAST(sqlc.arg(transition_ms) AS SIGNED),
    owner_id      = sqlc.arg(owner_id),
    queue         = SUBSTRING(queue, 30)
WHERE mutex = sqlc.arg(mutex) AND owner_id = '' AND LEFT(queue, 16) = CAST(sqlc.arg(wkey) AS BINARY);

-- name: Release :execresult
-- Ends the live grant of owner_id with token (the token column is kept, so
-- the next grant's token is greater) and withdraws wkey from the queue in
-- any case (token 0 only withdraws); up to three expired entries at the
-- head leave the queue on the way. When a release leaves live waiters, the
-- mutex is reserved for the first one for window_ms (transition_at ahead,
-- owner_id empty); so it is when the reserved head withdraws and others
-- wait. The decision, also the reply's insert id: 1 released, 3 the
-- reserved head withdrew, 2 withdrew; no row changed: nothing to do.
UPDATE simba_mutex SET
    version       = version + 1
                    + 0 * LAST_INSERT_ID(IF(owner_id = sqlc.arg(owner_id) AND token = sqlc.arg(token) AND transition_at > (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000), 1,
                                            IF(owner_id = '' AND transition_at > (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) AND SUBSTRING(queue, 1, 16) = CAST(sqlc.arg(wkey) AS BINARY), 3, 2))),
    queue         = REPLACE(queue, CONCAT(CAST(sqlc.arg(wkey) AS BINARY), SUBSTRING(queue, LOCATE(CAST(sqlc.arg(wkey) AS BINARY), queue) + 16, 13)), ''),
    queue         = SUBSTRING(queue, 1 + 29 * IF(SUBSTRING(queue, 17, 13) > LPAD((UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000), 13, '0'), 0,
                                             IF(SUBSTRING(queue, 46, 13) > LPAD((UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000), 13, '0'), 1,
                                             IF(SUBSTRING(queue, 75, 13) > LPAD((UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000), 13, '0'), 2, 3)))),
    transition_at = IF(LAST_INSERT_ID() IN (1, 3),
                       IF(queue <> '', (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(window_ms) AS SIGNED), (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000)),
                       transition_at),
    ttl_at        = IF(LAST_INSERT_ID() = 1, (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000), ttl_at),
    owner_id      = IF(LAST_INSERT_ID() = 1, '', owner_id)
WHERE mutex = sqlc.arg(mutex)
  AND (owner_id = sqlc.arg(owner_id) AND token = sqlc.arg(token) AND transition_at > (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) OR LOCATE(CAST(sqlc.arg(wkey) AS BINARY), queue) > 0);

-- name: ReleaseIdle :execrows
-- Release for a grant made while nobody was queued: ends the live grant of
-- owner_id with token when nobody else is queued, as Release would (the
-- mutex is free at once, the token column kept, wkey's entry gone), in a
-- plain single-row UPDATE without Release's queue arithmetic. Nobody else
-- is queued when the queue is empty or holds wkey's own entry alone: a new
-- row starts with its acquirer's (see Acquire), so the first release of
-- every name finds one. 0 rows when the grant is not the current one or
-- someone queued since: the caller then runs Release, which tells the two
-- apart and hands over. version always changes, so the count is the same
-- with or without clientFoundRows.
UPDATE simba_mutex SET
    version       = version + 1,
    ttl_at        = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000),
    transition_at = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000),
    owner_id      = '',
    queue         = ''
WHERE mutex = sqlc.arg(mutex) AND owner_id = sqlc.arg(owner_id) AND token = sqlc.arg(token)
  AND transition_at > (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000)
  AND (queue = '' OR LENGTH(queue) = 29 AND LEFT(queue, 16) = CAST(sqlc.arg(wkey) AS BINARY));

-- name: ReleaseBells :execresult
-- Release, run on the connection that holds owner_id's doorbell (its
-- waiter's, kept while it holds the mutex): it also lets every named lock
-- of the session go when it changes the row, which wakes the next waiter
-- without a statement of its own. The lock goes before the commit; the
-- waiter's acquire then waits for the row lock, and sees the release.
UPDATE simba_mutex SET
    version       = version + 1
                    + 0 * LAST_INSERT_ID(IF(owner_id = sqlc.arg(owner_id) AND token = sqlc.arg(token) AND transition_at > (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000), 1,
                                            IF(owner_id = '' AND transition_at > (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) AND SUBSTRING(queue, 1, 16) = CAST(sqlc.arg(wkey) AS BINARY), 3, 2)))
                    + 0 * COALESCE(RELEASE_ALL_LOCKS(), 0),
    queue         = REPLACE(queue, CONCAT(CAST(sqlc.arg(wkey) AS BINARY), SUBSTRING(queue, LOCATE(CAST(sqlc.arg(wkey) AS BINARY), queue) + 16, 13)), ''),
    queue         = SUBSTRING(queue, 1 + 29 * IF(SUBSTRING(queue, 17, 13) > LPAD((UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000), 13, '0'), 0,
                                             IF(SUBSTRING(queue, 46, 13) > LPAD((UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000), 13, '0'), 1,
                                             IF(SUBSTRING(queue, 75, 13) > LPAD((UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000), 13, '0'), 2, 3)))),
    transition_at = IF(LAST_INSERT_ID() IN (1, 3),
                       IF(queue <> '', (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(window_ms) AS SIGNED), (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000)),
                       transition_at),
    ttl_at        = IF(LAST_INSERT_ID() = 1, (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000), ttl_at),
    owner_id      = IF(LAST_INSERT_ID() = 1, '', owner_id)
WHERE mutex = sqlc.arg(mutex)
  AND (owner_id = sqlc.arg(owner_id) AND token = sqlc.arg(token) AND transition_at > (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) OR LOCATE(CAST(sqlc.arg(wkey) AS BINARY), queue) > 0);


-- name: Renew :execresult
-- Extends the live grant of owner_id with token from now; 0 rows when that
-- grant is not the current one or its transition has ended. version
-- always changes, so the count is the same with or without clientFoundRows.
-- The reply's insert id is 4 × the server's now (epoch ms) plus 2 when the
-- queue's first or last entry is live (others wait: the holder takes its
-- doorbell), else plus 1: the now the grant was extended from, without a
-- second statement.
UPDATE simba_mutex SET
    version       = version + 1
                    + 0 * LAST_INSERT_ID(4 * (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000)
                                         + 1 + (SUBSTRING(queue, 17, 13) > LPAD((UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000), 13, '0')
                                              OR SUBSTRING(queue, GREATEST(LENGTH(queue) - 12, 1), 13) > LPAD((UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000), 13, '0'))),
    ttl_at        = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(ttl_ms) AS SIGNED),
    transition_at = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(ttl_ms) AS SIGNED) + CAST(sqlc.arg(transition_ms) AS SIGNED)
WHERE mutex = sqlc.arg(mutex) AND owner_id = sqlc.arg(owner_id) AND token = sqlc.arg(token)
  AND transition_at > (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000);

-- name: RenewBatch :exec
-- Renews, as Renew, every live grant named in grants (mutex, NUL, owner_id,
-- NUL, token in decimal) of the mutexes listed; GetMany reads the outcome.
UPDATE simba_mutex SET
    ttl_at        = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(ttl_ms) AS SIGNED),
    transition_at = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(ttl_ms) AS SIGNED) + CAST(sqlc.arg(transition_ms) AS SIGNED),
    version       = version + 1
WHERE mutex IN (sqlc.slice(mutexes))
  AND grant_key IN (sqlc.slice(grants))
  AND transition_at > (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000);

-- name: Get :one
-- Reads a mutex with the server's now; no row for an unknown mutex.
SELECT owner_id, token, ttl_at, transition_at, queue,
       CAST((UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) AS SIGNED) AS now_ms
FROM simba_mutex
WHERE mutex = sqlc.arg(mutex);

-- name: GetMany :many
-- Reads the listed mutexes with the server's now.
SELECT mutex, owner_id, token, ttl_at, transition_at, queue,
       CAST((UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) AS SIGNED) AS now_ms
FROM simba_mutex
WHERE mutex IN (sqlc.slice(mutexes));

-- name: List :many
-- Every mutex with a live grant, by name, with the server's now.
SELECT mutex, owner_id, token, ttl_at, transition_at,
       CAST((UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) AS SIGNED) AS now_ms
FROM simba_mutex
WHERE owner_id <> '' AND transition_at > (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000)
ORDER BY mutex;

-- name: Prunable :many
-- The first step of a prune: at most max_rows rows free for retention_ms
-- or longer (their transition, or the hand-off window of their release,
-- ended that long ago), with their tokens. A plain read: it locks nothing.
SELECT mutex, token
FROM simba_mutex
WHERE mutex <> '' AND transition_at <= (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) - CAST(sqlc.arg(retention_ms) AS SIGNED)
LIMIT ?;

-- name: RaiseFloor :execresult
-- The second step: raises the token floor (the row whose mutex is '') to
-- at least floor, the highest token Prunable returned. The reply's insert
-- id is the floor after it.
INSERT INTO simba_mutex (mutex, token) VALUES ('', CAST(sqlc.arg(floor) AS SIGNED))
ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(GREATEST(token, VALUES(token))), version = version + 1;

-- name: Prune :execrows
-- The last step: deletes the rows Prunable named that are still free for
-- retention_ms or longer and whose token is at most floor, the value
-- RaiseFloor returned (a row taken and freed since may have a greater
-- token: it stays). Each row is found by its key, so only those rows are
-- locked.
DELETE FROM simba_mutex
WHERE mutex IN (sqlc.slice(mutexes))
  AND mutex <> '' AND transition_at <= (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) - CAST(sqlc.arg(retention_ms) AS SIGNED)
  AND token <= CAST(sqlc.arg(floor) AS SIGNED);

-- name: EnsureFloor :exec
-- Creates the token floor row (mutex '', token 0) if it is missing: a new
-- name's acquire then reads, and share-locks, one existing row, which
-- takes no gap lock. A Store runs it once, before its first acquire.
INSERT IGNORE INTO simba_mutex (mutex) VALUES ('');

-- name: ListPage :many
-- At most max_rows mutexes with a live grant whose names sort after
-- after_mutex, by name, with the server's now: one page of a listing.
SELECT mutex, owner_id, token, ttl_at, transition_at,
       CAST((UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) AS SIGNED) AS now_ms
FROM simba_mutex
WHERE mutex > CAST(sqlc.arg(after_mutex) AS BINARY) AND owner_id <> ''
  AND transition_at > (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000)
ORDER BY mutex
LIMIT ?;
