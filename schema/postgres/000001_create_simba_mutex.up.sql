-- simba-go: one row per mutex. Times are epoch milliseconds on the
-- server's clock; a row with owner_id = '' is a free mutex whose token
-- column still holds the highest token ever granted, so tokens never go
-- backwards. COLLATE "C" compares names and owners byte by byte.
-- To use another table name, copy this file and change the name (then
-- pass sqlstore.WithTable).
CREATE TABLE simba_mutex (
    mutex         varchar(255) COLLATE "C" NOT NULL PRIMARY KEY,
    owner_id      varchar(128) COLLATE "C" NOT NULL DEFAULT '',
    acquired_at   bigint NOT NULL DEFAULT 0,
    ttl_at        bigint NOT NULL DEFAULT 0,
    transition_at bigint NOT NULL DEFAULT 0,
    token         bigint NOT NULL DEFAULT 0 CHECK (token >= 0),
    version       bigint NOT NULL DEFAULT 0
);
