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
