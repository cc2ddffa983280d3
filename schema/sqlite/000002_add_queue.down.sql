ALTER TABLE simba_mutex DROP COLUMN grant_key;
ALTER TABLE simba_mutex DROP COLUMN queue;
