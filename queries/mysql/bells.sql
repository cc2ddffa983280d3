-- Doorbells: MySQL has no NOTIFY. A contender that waits in a mutex's
-- queue holds, on a connection of its own, the named lock of its own key
-- (its bell), and blocks in GET_LOCK on the bell of whom it waits behind
-- (its predecessor in the queue, or the owner): a release lets the
-- owner's bell go, which wakes the first waiter and only it. A contender
-- that waited keeps its bell while it holds the mutex; one that got the
-- mutex without waiting takes its bell after a short while (a holder
-- connection). Bells are hints: the row stays the only source of truth.
-- Names are 'simba:' and 40 hex digits of a SHA-256 of the database, the
-- table, the mutex and the key, within MySQL's 64-character limit.

-- name: WaitBell :one
-- Takes this session's bell (self) unless it holds it already, then waits
-- at most timeout_s for the bell of pred: rang is 1 when pred's session let
-- it go (this session then lets it go at once: dropped), 0 when the wait
-- timed out, -1 when nobody holds pred's bell (nothing to wait on).
-- Evaluated left to right.
SELECT CAST(COALESCE(IF(IS_USED_LOCK(CONCAT('simba:', LEFT(SHA2(CONCAT_WS(0x00, DATABASE(), CAST(sqlc.arg(scope) AS BINARY), CAST(sqlc.arg(mutex) AS BINARY), sqlc.arg(self)), 256), 40))) = CONNECTION_ID(), 1,
                        GET_LOCK(CONCAT('simba:', LEFT(SHA2(CONCAT_WS(0x00, DATABASE(), CAST(sqlc.arg(scope) AS BINARY), CAST(sqlc.arg(mutex) AS BINARY), sqlc.arg(self)), 256), 40)), 0)), 0) AS SIGNED) AS mine,
       CAST(COALESCE(IF(IS_USED_LOCK(CONCAT('simba:', LEFT(SHA2(CONCAT_WS(0x00, DATABASE(), CAST(sqlc.arg(scope) AS BINARY), CAST(sqlc.arg(mutex) AS BINARY), sqlc.arg(pred)), 256), 40))) IS NULL, -1,
                        GET_LOCK(CONCAT('simba:', LEFT(SHA2(CONCAT_WS(0x00, DATABASE(), CAST(sqlc.arg(scope) AS BINARY), CAST(sqlc.arg(mutex) AS BINARY), sqlc.arg(pred)), 256), 40)), CAST(sqlc.arg(timeout_s) AS SIGNED))), 0) AS SIGNED) AS rang,
       CAST(COALESCE(RELEASE_LOCK(CONCAT('simba:', LEFT(SHA2(CONCAT_WS(0x00, DATABASE(), CAST(sqlc.arg(scope) AS BINARY), CAST(sqlc.arg(mutex) AS BINARY), sqlc.arg(pred)), 256), 40))), 0) AS SIGNED) AS dropped;

-- name: WaitGrant :execresult
-- WaitBell, and when pred's bell rang or nobody held it, in the same
-- statement, the grant that AcquireHead makes: the waiter's grant needs no
-- round trip of its own after the release, and a waiter whose predecessor
-- holds no bell (a holder that took the lock without waiting) tries the
-- row on its own connection, not on one of the pool. The wait runs in a
-- derived table, which the server materializes before it reads the row
-- (LIMIT keeps MySQL from merging it into the WHERE clause), so the row is
-- not locked while the statement waits, and a release that lets its bell
-- go before it commits is never blocked by it; the grant then waits for
-- that commit. It grants
-- owner_id when the mutex is free and wkey heads its queue, as
-- AcquireHead does (a new token; the head entry leaves the queue), with
-- expiries from the statement's start (UNIX_TIMESTAMP() and NOW(6) are
-- fixed when it starts, before the wait): the grant lives no longer than
-- one asked for at the statement's send time, so that a deadline taken
-- from the send time is never later than the server's, however long the
-- wait was. The reply: 1 row changed, granted, its insert id the token;
-- 0 rows, not granted, its insert id 10 + 3 * mine + rang + 1 (mine and
-- rang as WaitBell's).
UPDATE simba_mutex AS m
JOIN (SELECT LAST_INSERT_ID(10 + 3 * w.mine + w.rang + 1 + 0 * w.dropped) AS code, w.rang
      FROM (SELECT CAST(COALESCE(IF(IS_USED_LOCK(CONCAT('simba:', LEFT(SHA2(CONCAT_WS(0x00, DATABASE(), CAST(sqlc.arg(scope) AS BINARY), CAST(sqlc.arg(mutex) AS BINARY), sqlc.arg(self)), 256), 40))) = CONNECTION_ID(), 1, GET_LOCK(CONCAT('simba:', LEFT(SHA2(CONCAT_WS(0x00, DATABASE(), CAST(sqlc.arg(scope) AS BINARY), CAST(sqlc.arg(mutex) AS BINARY), sqlc.arg(self)), 256), 40)), 0)), 0) AS SIGNED) AS mine,
                   CAST(COALESCE(IF(IS_USED_LOCK(CONCAT('simba:', LEFT(SHA2(CONCAT_WS(0x00, DATABASE(), CAST(sqlc.arg(scope) AS BINARY), CAST(sqlc.arg(mutex) AS BINARY), sqlc.arg(pred)), 256), 40))) IS NULL, -1, GET_LOCK(CONCAT('simba:', LEFT(SHA2(CONCAT_WS(0x00, DATABASE(), CAST(sqlc.arg(scope) AS BINARY), CAST(sqlc.arg(mutex) AS BINARY), sqlc.arg(pred)), 256), 40)), CAST(sqlc.arg(timeout_s) AS SIGNED))), 0) AS SIGNED) AS rang,
                   CAST(COALESCE(RELEASE_LOCK(CONCAT('simba:', LEFT(SHA2(CONCAT_WS(0x00, DATABASE(), CAST(sqlc.arg(scope) AS BINARY), CAST(sqlc.arg(mutex) AS BINARY), sqlc.arg(pred)), 256), 40))), 0) AS SIGNED) AS dropped
            LIMIT 1) AS w
      LIMIT 1) AS b
SET m.token         = LAST_INSERT_ID(m.token + 1),
    m.version       = m.version + 1,
    m.acquired_at   = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000),
    m.ttl_at        = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(ttl_ms) AS SIGNED),
    m.transition_at = (UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) + CAST(sqlc.arg(ttl_ms) AS SIGNED) + CAST(sqlc.arg(transition_ms) AS SIGNED),
    m.owner_id      = sqlc.arg(owner_id),
    m.queue         = SUBSTRING(m.queue, 30)
WHERE m.mutex = sqlc.arg(mutex) AND m.owner_id = '' AND LEFT(m.queue, 16) = CAST(sqlc.arg(wkey) AS BINARY) AND b.rang <> 0;

-- name: TakeBell :one
-- Takes this session's bell (self) if nobody holds it: 1 when it did (or
-- held it already), 0 when another session keeps it.
SELECT CAST(COALESCE(IF(IS_USED_LOCK(CONCAT('simba:', LEFT(SHA2(CONCAT_WS(0x00, DATABASE(), CAST(sqlc.arg(scope) AS BINARY), CAST(sqlc.arg(mutex) AS BINARY), sqlc.arg(self)), 256), 40))) = CONNECTION_ID(), 1,
                        GET_LOCK(CONCAT('simba:', LEFT(SHA2(CONCAT_WS(0x00, DATABASE(), CAST(sqlc.arg(scope) AS BINARY), CAST(sqlc.arg(mutex) AS BINARY), sqlc.arg(self)), 256), 40)), 0)), 0) AS SIGNED) AS taken;

-- name: DropBell :one
-- Lets this session's bell (self) go: 1 when the session held it.
SELECT CAST(COALESCE(RELEASE_LOCK(CONCAT('simba:', LEFT(SHA2(CONCAT_WS(0x00, DATABASE(), CAST(sqlc.arg(scope) AS BINARY), CAST(sqlc.arg(mutex) AS BINARY), sqlc.arg(self)), 256), 40))), 0) AS SIGNED) AS dropped;

-- name: DropBells :one
-- Lets every named lock of this session go; returns how many it held.
SELECT CAST(COALESCE(RELEASE_ALL_LOCKS(), 0) AS SIGNED) AS dropped;
