ALTER TABLE simba_mutex DROP COLUMN grant_key, DROP COLUMN queue;
