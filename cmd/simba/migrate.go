//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/schema"
)

// migrateTimeout bounds simba migrate.
const migrateTimeout = 2 * time.Minute

// cmdMigrate implements simba migrate.
func (c *cli) cmdMigrate(f *flags) error {
	if len(f.args) != 1 {
		return fail(codeUsage, "migrate: want one of up, down, version (usage: simba migrate [flags] up|down|version)")
	}
	op := f.args[0]
	if op != "up" && op != "down" && op != "version" {
		return fail(codeUsage, "migrate: unknown operation %q: want up, down or version", op)
	}
	t, err := c.storeTarget(f.store)
	if err != nil {
		return err
	}
	if t.kind == kindRedis || t.kind == kindZK {
		if f.json {
			return json.NewEncoder(c.stdout).Encode(struct {
				Store string `json:"store"`
			}{string(t.kind)})
		}
		fmt.Fprintf(c.stdout, "nothing to migrate: %s stores keep no schema\n", t.kind)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), migrateTimeout)
	defer cancel()
	b, err := c.open(ctx, t, timing{ttl: lease.DefaultTTL, transition: lease.DefaultTransition}, forMigrate)
	if err != nil {
		return err
	}
	defer b.Close()
	switch op {
	case "up":
		err = schema.Migrate(ctx, b.db, b.dialect)
	case "down":
		err = schema.MigrateDown(ctx, b.db, b.dialect)
	}
	if err != nil {
		return withCode(codeUnavailable, fmt.Errorf("migrate %s: %s: %v", op, b.display, err))
	}
	v, dirty, err := schema.Version(ctx, b.db, b.dialect)
	if err != nil {
		return withCode(codeUnavailable, fmt.Errorf("migrate %s: %s: %v", op, b.display, err))
	}
	if dirty {
		return fail(codeUnavailable, "migrate %s: %s: version %d is dirty: a migration failed half-way; fix the database by hand (see golang-migrate's documentation)", op, b.display, v)
	}
	if f.json {
		return json.NewEncoder(c.stdout).Encode(struct {
			Version uint `json:"version"`
			Dirty   bool `json:"dirty"`
		}{v, dirty})
	}
	fmt.Fprintln(c.stdout, v)
	return nil
}
