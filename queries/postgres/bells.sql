-- Doorbells (WithPostgresDoorbells): as on MySQL (queries/mysql/bells.sql),
-- a contender that waits in a mutex's queue holds, on a connection of its
-- own, the advisory lock of its own key (its bell), and blocks on the bell
-- of whom it waits behind: a release lets the owner's bell go, which wakes
-- the first waiter and only it. LISTEN/NOTIFY cannot: PostgreSQL 15
-- signals every listening backend of the database on each notifying
-- commit, whatever the channel, and each reads the notification queue in a
-- transaction of its own. Bells are session-level advisory locks on one
-- bigint, which sqlstore derives from the table, the mutex and the key
-- (the first 8 bytes of a SHA-256); they are per database. Bells are
-- hints: the row stays the only source of truth. Each statement runs its
-- steps in order through a chain of materialized CTEs, each reading the
-- one before.

-- name: WaitBell :one
-- Takes this session's bell (self) unless have says it holds it already,
-- then waits for the bell of pred at most timeout_ms: rang is 1 when
-- pred's session let it go, -1 when nobody held it (nothing to wait on);
-- either way this session lets pred's bell go at once (dropped). When the
-- wait times out the statement fails with lock_not_available (55P03), and
-- the caller waits again: a statement that waits keeps its snapshot, which
-- holds back what VACUUM may remove in the whole database, so no wait is
-- long. The limit is the statement's own (set_config local to its
-- transaction); a session's statement_timeout still applies.
WITH s AS MATERIALIZED (
    SELECT CASE WHEN sqlc.arg(have)::boolean THEN true ELSE pg_try_advisory_lock(sqlc.arg(self)::bigint) END AS mine
),
p AS MATERIALIZED (
    SELECT s.mine, pg_try_advisory_lock(sqlc.arg(pred)::bigint) AS free,
           set_config('lock_timeout', sqlc.arg(timeout_ms)::bigint::text, true) AS lock_timeout
    FROM s
),
l AS MATERIALIZED (
    SELECT p.mine, p.free,
           (SELECT count(*) FROM (SELECT pg_advisory_lock(sqlc.arg(pred)::bigint)) AS z WHERE NOT p.free) AS waited
    FROM p
),
u AS MATERIALIZED (
    SELECT l.mine, l.free, pg_advisory_unlock(sqlc.arg(pred)::bigint) AS dropped FROM l
)
SELECT u.mine::boolean AS mine, (CASE WHEN u.free THEN -1 ELSE 1 END)::bigint AS rang, u.dropped::boolean AS dropped
FROM u;

-- name: TakeBell :one
-- Takes this session's bell (self) if nobody holds it: true when it did.
-- The caller takes it only when its session does not hold it already (an
-- advisory lock taken twice must be let go twice).
SELECT pg_try_advisory_lock(sqlc.arg(self)::bigint)::boolean AS taken;

-- name: DropBell :one
-- Lets this session's bell (self) go: true when the session held it.
SELECT pg_advisory_unlock(sqlc.arg(self)::bigint)::boolean AS dropped;

-- name: DropBells :exec
-- Lets every advisory lock of this session go.
SELECT pg_advisory_unlock_all();

-- name: WaitGrant :one
-- WaitBell, and when pred's bell rang (rang 1), in the same statement, the
-- grant that AcquireHead makes: the waiter's grant needs no round trip of
-- its own after the release. When nobody held pred's bell (rang -1: a
-- holder that took the lock without waiting, or a waiter still on its way
-- to its bell) it grants too, if the row as it is now is wkey's to take:
-- the waiter then tries the row on its own connection, and needs no
-- connection of the pool for it. The release lets its bell go before it
-- commits; the UPDATE then waits for the row until that commit. Its
-- snapshot was taken at the statement's start, before the wait, when the
-- row was held (and wkey perhaps not yet first), so the row is matched by
-- its mutex alone and the grant is decided in the SET list: under READ
-- COMMITTED, PostgreSQL evaluates it again on the row's latest version,
-- as the release committed it (EvalPlanQual). The grant is AcquireHead's
-- (owner_id when the mutex is free: a new token, the head entry leaves the
-- queue), with expiries from the clock after the wait; a row that is not
-- free or not wkey's to take is written back unchanged (after a ring; with
-- a free bell such a row is not written). token is the grant's, 0 when
-- there was none. Under REPEATABLE READ or SERIALIZABLE the UPDATE fails
-- with serialization_failure (40001) instead, after the wait: the caller
-- then takes it as a ring without a grant.
WITH s AS MATERIALIZED (
    SELECT CASE WHEN sqlc.arg(have)::boolean THEN true ELSE pg_try_advisory_lock(sqlc.arg(self)::bigint) END AS mine
),
p AS MATERIALIZED (
    SELECT s.mine, pg_try_advisory_lock(sqlc.arg(pred)::bigint) AS free,
           set_config('lock_timeout', sqlc.arg(timeout_ms)::bigint::text, true) AS lock_timeout
    FROM s
),
l AS MATERIALIZED (
    SELECT p.mine, p.free,
           (SELECT count(*) FROM (SELECT pg_advisory_lock(sqlc.arg(pred)::bigint)) AS z WHERE NOT p.free) AS waited
    FROM p
),
u AS MATERIALIZED (
    SELECT l.mine, l.free, pg_advisory_unlock(sqlc.arg(pred)::bigint) AS dropped,
           (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms,
           sqlc.arg(ttl_ms)::bigint AS ttl, sqlc.arg(transition_ms)::bigint AS tr,
           sqlc.arg(owner_id)::varchar AS owner, sqlc.arg(wkey)::text AS wkey
    FROM l
),
g AS (
    UPDATE simba_mutex AS m SET
        (token, version, acquired_at, ttl_at, transition_at, queue, owner_id) = (
            SELECT CASE WHEN x.ok THEN m.token + 1 ELSE m.token END,
                   CASE WHEN x.ok THEN m.version + 1 ELSE m.version END,
                   CASE WHEN x.ok THEN u.ms ELSE m.acquired_at END,
                   CASE WHEN x.ok THEN u.ms + u.ttl ELSE m.ttl_at END,
                   CASE WHEN x.ok THEN u.ms + u.ttl + u.tr ELSE m.transition_at END,
                   CASE WHEN x.ok THEN substr(m.queue, 30) ELSE m.queue END,
                   CASE WHEN x.ok THEN u.owner ELSE m.owner_id END
            FROM (SELECT m.owner_id = '' AND left(m.queue, 16) = u.wkey AS ok) AS x)
    FROM u
    WHERE m.mutex = sqlc.arg(mutex) AND (NOT u.free OR m.owner_id = '' AND left(m.queue, 16) = u.wkey)
    RETURNING m.owner_id = u.owner AND m.acquired_at = u.ms AS granted, m.token
)
SELECT u.mine::boolean AS mine, (CASE WHEN u.free THEN -1 ELSE 1 END)::bigint AS rang,
       coalesce((SELECT g.token FROM g WHERE g.granted), 0)::bigint AS token
FROM u;
