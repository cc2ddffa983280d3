// Command handoff runs three contenders for one lock on the in-memory
// store and prints every hand-off with its owner and fencing token. Each
// leader works briefly, then resigns; the release wakes the longest waiter
// at once, so leadership rotates fairly and tokens only grow.
//
//	go run ./examples/handoff
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

const handoffs = 6

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "handoff:", err)
		os.Exit(1)
	}
}

func run(out io.Writer) error {
	ctx := context.Background()
	store := memstore.New()
	start := time.Now()

	var (
		mu    sync.Mutex // guards the counters and out: callbacks of different contenders run concurrently
		count int
		last  uint64
		done  = make(chan struct{})
	)
	var contenders []*lease.Contender
	var managers []*lease.Manager
	defer func() { // on an early return; after the Close below, a no-op
		for _, m := range managers {
			_ = m.Close(ctx)
		}
	}()
	for _, name := range []string{"alpha", "beta", "gamma"} {
		m, err := lease.NewManager(store, lease.WithContenderID(name),
			lease.WithTTL(2*time.Second), lease.WithTransition(time.Second))
		if err != nil {
			return err
		}
		managers = append(managers, m)
		c, err := m.Contend("nightly-report", lease.Callbacks{
			OnAcquired: func(ctx context.Context, l *lease.Lease) {
				mu.Lock()
				count++
				n, prev := count, last
				last = l.Token()
				if n <= handoffs {
					fmt.Fprintf(out, "%6.3fs  %-5s leads   token %d (previous %d)\n",
						time.Since(start).Seconds(), l.Owner().ID, l.Token(), prev)
				}
				mu.Unlock()
				if n > handoffs {
					return // the demo is over; Stop ends this term
				}
				if n == handoffs {
					close(done)
					return
				}
				select { // lead for a moment, then resign
				case <-time.After(200 * time.Millisecond):
					_ = l.Release(ctx)
				case <-ctx.Done():
				}
			},
			OnReleased: func(prev lease.Owner) {
				mu.Lock()
				defer mu.Unlock()
				if count < handoffs {
					fmt.Fprintf(out, "%6.3fs  %-5s resigns token %d\n",
						time.Since(start).Seconds(), prev.ID, prev.Token)
				}
			},
		})
		if err != nil {
			return err
		}
		contenders = append(contenders, c)
	}

	select {
	case <-done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("only %d hand-offs in 30s", count)
	}
	for _, c := range contenders {
		if err := c.Stop(ctx); err != nil {
			return err
		}
	}
	for _, m := range managers {
		if err := m.Close(ctx); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "%d hand-offs in %.3fs\n", handoffs, time.Since(start).Seconds())
	return nil
}
