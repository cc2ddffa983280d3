//go:build !unix

package sqlstore

import "context"

// writeLock is the turn-taking of SQLite writers through a lock file,
// which needs flock(2): on other systems writers wait as SQLite makes
// them wait.
type writeLock struct{}

func openWriteLock(string) *writeLock           { return nil }
func (l *writeLock) lock(context.Context) error { return nil }
func (l *writeLock) unlock()                    {}
