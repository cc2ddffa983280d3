-- simba-go: one row per mutex. Times are epoch milliseconds on SQLite's
-- clock (the host's: every process sharing the file reads the same one);
-- a row with owner_id = '' is a free mutex whose token column still holds
-- the highest token ever granted, so tokens never go backwards. TEXT
-- compares with SQLite's BINARY collation (memcmp): names that differ in
-- case or trailing spaces are different mutexes.
-- To use another table name, copy this file and change the name (then
-- pass sqlstore.WithTable).
CREATE TABLE simba_mutex (
    mutex         TEXT    NOT NULL PRIMARY KEY,
    owner_id      TEXT    NOT NULL DEFAULT '',
    acquired_at   INTEGER NOT NULL DEFAULT 0,
    ttl_at        INTEGER NOT NULL DEFAULT 0,
    transition_at INTEGER NOT NULL DEFAULT 0,
    token         INTEGER NOT NULL DEFAULT 0 CHECK (token >= 0),
    version       INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
