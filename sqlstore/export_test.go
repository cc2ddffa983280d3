package sqlstore

// MySQLWithoutReturning makes s, a MySQL Store, run the form of acquire
// that MySQL takes (no RETURNING: the token in the reply's insert id, a
// read after a loss), so that the tests run it on MariaDB too.
func MySQLWithoutReturning(s *Store) {
	if e, ok := s.eng.(myEngine); ok {
		e.flavor.Store(flavorPlain)
	}
}
