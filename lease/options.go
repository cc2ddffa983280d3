package lease

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/metric"
)

// Defaults, as in Simba.
const (
	DefaultTTL        = 10 * time.Second
	DefaultTransition = 6 * time.Second
)

// maxLease bounds ttl + transition (about 292 years / 2), so that every sum
// and product the Manager forms stays far from overflowing.
const maxLease = time.Duration(1<<62 - 1)

// An Option configures a Manager. Options validate their argument; invalid
// ones make NewManager fail with an error wrapping [ErrInvalidArgument].
type Option func(*config) error

type config struct {
	ttl         time.Duration
	transition  time.Duration
	safety      time.Duration // 0: derived
	callTimeout time.Duration // 0: derived
	id          string
	logger      *slog.Logger
	clock       Clock

	meterProvider metric.MeterProvider // nil: no metrics
	metricNames   []string             // locks named in metrics
}

// WithTTL sets the owner's exclusive window: a grant, and every renewal,
// runs for ttl on the server's clock before its transition starts. The
// holder renews about every ttl/3. Default 10 s; it must be at least 1 ms.
func WithTTL(ttl time.Duration) Option {
	return func(c *config) error {
		if ttl < time.Millisecond {
			return fmt.Errorf("%w: ttl %v is less than 1ms", ErrInvalidArgument, ttl)
		}
		c.ttl = ttl
		return nil
	}
}

// WithTransition sets the grace window after ttl in which only the owner may
// renew; after ttl + transition anyone may take the lock. Waiters retry at
// the end of the owner's transition. Default 6 s; zero is allowed, negative
// is not.
func WithTransition(transition time.Duration) Option {
	return func(c *config) error {
		if transition < 0 {
			return fmt.Errorf("%w: transition %v is negative", ErrInvalidArgument, transition)
		}
		c.transition = transition
		return nil
	}
}

// WithSafetyMargin sets how long before the server could hand the lock to
// someone else the holder considers its lease lost. The holder's deadline is
// t_send + ttl + transition − margin, where t_send is when the last confirmed
// acquire or renew was sent. The margin absorbs clock-rate differences
// between client and server and the holder's scheduling delay. Default:
// DefaultSafetyMargin(ttl, transition). It must be positive and leave at least half of
// ttl + transition.
func WithSafetyMargin(margin time.Duration) Option {
	return func(c *config) error {
		if margin <= 0 {
			return fmt.Errorf("%w: safety margin %v is not positive", ErrInvalidArgument, margin)
		}
		c.safety = margin
		return nil
	}
}

// DefaultSafetyMargin is the safety margin a Manager uses when
// WithSafetyMargin is not given: max(transition/2, ttl/10).
func DefaultSafetyMargin(ttl, transition time.Duration) time.Duration {
	return max(transition/2, ttl/10)
}

// WithCallTimeout bounds every single store call. Default ttl/4; it must
// be positive and at most ttl.
func WithCallTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: call timeout %v is not positive", ErrInvalidArgument, d)
		}
		c.callTimeout = d
		return nil
	}
}

// WithContenderID sets the id under which this Manager contends. It must be
// unique among all Managers that share a store: two Managers with one id are
// one contender, and would both believe they hold a lock. That holds for a
// Manager that replaces a closed one too: a grant the closed Manager could
// not release (its store was away) stays live for up to ttl + transition,
// and a store hands a live grant to its id again, under the same token, so
// a new Manager under that id would hold it while the old one's holder may
// still work under it. Give each Manager an id of its own (the default),
// or let ttl + transition pass after such a Close before reusing the id.
// The default is "host:pid:random", unique per Manager.
func WithContenderID(id string) Option {
	return func(c *config) error {
		if err := ValidateContenderID(id); err != nil {
			return err
		}
		c.id = id
		return nil
	}
}

// WithLogger sets a logger for the Manager's events: leases acquired,
// released and lost, leadership gained and lost (Info; a loss is Warn),
// renewals and waiting attempts (Debug), and failed store calls (Warn).
// Every record carries [LogKeyEvent] and the keys listed with it; match on
// those, not on messages. The default discards everything.
//
// Most records come from the Manager's own goroutines. Acquire,
// TryAcquire and Release make an uncontended attempt, and so log its
// outcome, in the caller's goroutine; Contender events come from the
// Contender's goroutine. No record is logged under a lock of this
// package, and a disabled level costs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidArgument)
		}
		c.logger = l
		return nil
	}
}

// WithClock replaces the monotonic clock the Manager uses for deadlines,
// renewals and retries. For tests; the default is the time package.
func WithClock(clk Clock) Option {
	return func(c *config) error {
		if clk == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalidArgument)
		}
		c.clock = clk
		return nil
	}
}

func newConfig(opts []Option) (config, error) {
	c := config{ttl: DefaultTTL, transition: DefaultTransition}
	for _, opt := range opts {
		if opt == nil {
			return c, fmt.Errorf("%w: nil option", ErrInvalidArgument)
		}
		if err := opt(&c); err != nil {
			return c, err
		}
	}
	if c.ttl > maxLease-c.transition {
		return c, fmt.Errorf("%w: ttl %v + transition %v overflows", ErrInvalidArgument, c.ttl, c.transition)
	}
	if c.safety == 0 {
		c.safety = DefaultSafetyMargin(c.ttl, c.transition)
	}
	if c.safety > (c.ttl+c.transition)/2 {
		return c, fmt.Errorf("%w: safety margin %v exceeds half of ttl+transition (%v)",
			ErrInvalidArgument, c.safety, c.ttl+c.transition)
	}
	if c.callTimeout == 0 {
		c.callTimeout = max(c.ttl/4, time.Millisecond)
	}
	if c.callTimeout > c.ttl {
		return c, fmt.Errorf("%w: call timeout %v exceeds ttl %v", ErrInvalidArgument, c.callTimeout, c.ttl)
	}
	if c.id == "" {
		c.id = defaultContenderID()
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.clock == nil {
		c.clock = systemClock{}
	}
	return c, nil
}

// defaultContenderID is host:pid:random. The random part makes every
// Manager a distinct contender, even two in one process or two processes
// with the same pid in different containers.
func defaultContenderID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	host = trimHost(host, 64)
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// trimHost cuts host to at most n bytes on a rune boundary, dropping
// invalid bytes at the end, so the id stays valid UTF-8.
func trimHost(host string, n int) string {
	for len(host) > n || !utf8.ValidString(host) {
		_, size := utf8.DecodeLastRuneInString(host)
		host = host[:len(host)-size]
	}
	return host
}
