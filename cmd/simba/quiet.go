//go:build unix

package main

import (
	"context"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// quietDrivers silences the log lines that go-redis and the MySQL driver
// print by themselves: simba reports each failure as one line of its own.
// The loggers are process-wide, so only main calls it.
func quietDrivers() {
	redis.SetLogger(quiet{})
	_ = mysql.SetLogger(quiet{}) // fails only for a nil logger
}

// quiet discards log lines of the drivers (and of go-zookeeper, see open).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
func (quiet) Print(...any)                           {}
