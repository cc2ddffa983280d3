// Package payments is the application code of the testcontainers example: a
// job that settles invoices, one settlement of an invoice at a time across
// every process, under a simba-go lease, and a ledger that refuses the
// late write of a holder that lost its lease. Its tests (payments_test.go)
// show how to test such code against real servers that testcontainers-go's
// modules start: Redis and PostgreSQL in containers, the simba-go schema
// migrated, a Manager built on the application's own client.
package payments

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/simba-go/simba/lease"
)

// ErrFenced is returned when a write carries an older fencing token than
// the ledger has already seen for the invoice: the writer's lease ended and
// someone else has held the invoice since.
var ErrFenced = errors.New("payments: write fenced off by a newer lease")

// Ledger records settlements in the application's PostgreSQL database,
// each with the fencing token of the lease it was made under.
type Ledger struct{ db *sql.DB }

// NewLedger creates the ledger's table when it is missing.
func NewLedger(ctx context.Context, db *sql.DB) (*Ledger, error) {
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS settlement (
		invoice text PRIMARY KEY, paid bigint NOT NULL, token bigint NOT NULL)`)
	if err != nil {
		return nil, fmt.Errorf("payments: create ledger: %w", err)
	}
	return &Ledger{db: db}, nil
}

// Record adds amount to what invoice has been paid, under token. It returns
// ErrFenced, and changes nothing, when the invoice was last recorded with a
// greater token.
func (l *Ledger) Record(ctx context.Context, invoice string, amount int64, token uint64) error {
	res, err := l.db.ExecContext(ctx, `INSERT INTO settlement (invoice, paid, token) VALUES ($1, $2, $3)
		ON CONFLICT (invoice) DO UPDATE SET paid = settlement.paid + EXCLUDED.paid, token = EXCLUDED.token
		WHERE settlement.token <= EXCLUDED.token`, invoice, amount, int64(token))
	if err != nil {
		return fmt.Errorf("payments: record %s: %w", invoice, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return errors.Join(ErrFenced, err)
	}
	return nil
}

// Paid returns what invoice has been paid in total.
func (l *Ledger) Paid(ctx context.Context, invoice string) (int64, error) {
	var paid int64
	err := l.db.QueryRowContext(ctx, `SELECT paid FROM settlement WHERE invoice = $1`, invoice).Scan(&paid)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return paid, err
}

// Settler settles invoices under the leases of one Manager (one per
// process in production).
type Settler struct {
	m      *lease.Manager
	ledger *Ledger
}

// NewSettler returns a Settler that takes leases from m.
func NewSettler(m *lease.Manager, ledger *Ledger) *Settler {
	return &Settler{m: m, ledger: ledger}
}

// Settle waits for the lease of invoice, calls charge (the payment
// provider) with the lease's context, which ends the moment the lease is
// lost, and records amount with the lease's fencing token.
func (s *Settler) Settle(ctx context.Context, invoice string, amount int64, charge func(context.Context) error) error {
	l, err := s.m.Acquire(ctx, "invoices/"+invoice)
	if err != nil {
		return err
	}
	defer l.Release(context.WithoutCancel(ctx))
	if err := charge(l.Context()); err != nil {
		return err
	}
	return s.ledger.Record(l.Context(), invoice, amount, l.Token())
}
