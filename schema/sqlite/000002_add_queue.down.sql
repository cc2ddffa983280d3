ALTER TABLE simba_mutex DROP COLUMN queue;
