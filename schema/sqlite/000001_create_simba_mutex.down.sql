DROP TABLE IF EXISTS simba_mutex;
