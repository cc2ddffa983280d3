package sqlstore_test

import (
	"github.com/simba-go/simba/internal/testhooks"
	"github.com/simba-go/simba/sqlstore"
)

// mysqlWithoutReturning makes s, a MySQL Store, run the form of acquire
// that MySQL takes (no RETURNING), through internal/testhooks (what
// sqlstore's export_test.go exposed when these tests lived beside it).
func mysqlWithoutReturning(s *sqlstore.Store) { testhooks.SQLMySQLWithoutReturning(s) }
