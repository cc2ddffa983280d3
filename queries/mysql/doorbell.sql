-- Doorbells: MySQL has no NOTIFY, so a Store that holds a grant also holds
-- a named lock derived from the database, the table and the mutex, on a
-- connection of its own; a waiter blocks in GET_LOCK on that name and tries
-- to acquire the row when the lock frees. The row stays the only source of
-- truth: a doorbell is a hint. Names are 'simba:' and 40 hex digits of a
-- SHA-256, within MySQL's 64-character limit.

-- name: TakeDoorbell :one
-- Takes the doorbell of mutex, waiting at most timeout_ms (0: not at all):
-- 1 when this session has it, 0 when another session kept it.
SELECT CAST(COALESCE(GET_LOCK(
    CONCAT('simba:', LEFT(SHA2(CONCAT_WS(0x00, DATABASE(), CAST(sqlc.arg(scope) AS BINARY), CAST(sqlc.arg(mutex) AS BINARY)), 256), 40)),
    CAST(sqlc.arg(timeout_ms) AS SIGNED) / 1000), 0) AS SIGNED) AS taken;

-- name: DropDoorbell :one
-- Releases the doorbell of mutex held by this session: 1 when it did.
SELECT CAST(COALESCE(RELEASE_LOCK(
    CONCAT('simba:', LEFT(SHA2(CONCAT_WS(0x00, DATABASE(), CAST(sqlc.arg(scope) AS BINARY), CAST(sqlc.arg(mutex) AS BINARY)), 256), 40))), 0) AS SIGNED) AS dropped;
