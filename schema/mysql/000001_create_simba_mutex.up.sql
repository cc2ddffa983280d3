-- simba-go: one row per mutex. Times are epoch milliseconds on the
-- server's clock (UTC arithmetic, independent of the session time zone);
-- a row with owner_id = '' is a free mutex whose token column still holds
-- the highest token ever granted, so tokens never go backwards.
-- mutex and owner_id are VARBINARY: byte-exact comparison, so names that
-- differ in case or in trailing spaces are different mutexes (utf8mb4_bin
-- is a PAD SPACE collation and would make 'a' and 'a ' collide).
-- To use another table name, copy this file and change the name (then
-- pass sqlstore.WithTable).
CREATE TABLE simba_mutex (
    mutex         varbinary(255) NOT NULL,
    owner_id      varbinary(128) NOT NULL DEFAULT '',
    acquired_at   bigint NOT NULL DEFAULT 0,
    ttl_at        bigint NOT NULL DEFAULT 0,
    transition_at bigint NOT NULL DEFAULT 0,
    token         bigint NOT NULL DEFAULT 0,
    version       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (mutex)
) ENGINE = InnoDB;
