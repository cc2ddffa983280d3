-- simba-go: the wait queue of a mutex, in its own row (sqlstore's fair
-- hand-off): fixed-width entries of 29 characters, oldest first, each a
-- contender's key (16 letters a-p) and the epoch millisecond at which the
-- entry expires (13 digits). A release hands the mutex to the first live
-- entry for a short window. Rows also carry the token floor: the row whose
-- mutex is '' holds the highest token of every pruned row, so that a name
-- whose row was pruned starts again above it (written by sqlstore's prune).
-- grant_key names the current grant (mutex, owner_id and token, NUL between
-- them), computed, never stored: a batch renewal matches its grants with
-- one IN list. (SQLite adds one column per ALTER TABLE.)
ALTER TABLE simba_mutex ADD COLUMN queue TEXT NOT NULL DEFAULT '';
ALTER TABLE simba_mutex ADD COLUMN grant_key TEXT AS (mutex || char(0) || owner_id || char(0) || token) VIRTUAL;
