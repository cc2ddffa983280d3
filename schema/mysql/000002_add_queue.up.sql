-- simba-go: the wait queue of a mutex, in its own row (sqlstore's fair
-- hand-off): fixed-width entries of 29 bytes, oldest first, each a
-- contender's key (16 letters a-p) and the epoch millisecond at which the
-- entry expires (13 digits); at most 128 entries. A release hands the
-- mutex to the first live entry for a short window. Rows also carry the
-- token floor: the row whose mutex is '' holds the highest token of every
-- pruned row, so that a name whose row was pruned starts again above it
-- (written by sqlstore's prune). grant_key names the current grant (mutex,
-- owner_id and token, NUL between them), computed, never stored: a batch
-- renewal matches its grants with one IN list.
ALTER TABLE simba_mutex
    ADD COLUMN queue varbinary(3712) NOT NULL DEFAULT '',
    ADD COLUMN grant_key varbinary(405) AS (CONCAT(mutex, 0x00, owner_id, 0x00, token)) VIRTUAL;
