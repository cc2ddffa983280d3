package lease

import "context"

// Lister is an optional Store capability: the locks with a live grant,
// a page at a time, for status pages and the simba CLI. It is never on a
// hot path and the Manager does not use it.
//
// A listing is a snapshot of nothing: a lock granted or released while
// the pages are read may or may not appear, and one that appears may be
// free by the time its record is read again. The order is the store's
// (SQL and ZooKeeper: by name; Redis: its key space's), and on some
// stores a name may appear on two pages (Redis SCAN while the server
// rehashes); a caller that must not show a name twice keeps what it
// showed.
type Lister interface {
	// ListPage returns about limit locks with a live grant, each with
	// its record, starting at cursor ("" for the first page), and the
	// cursor of the next page: "" when the listing is complete. A page
	// holds at most limit names, except on a store whose scan cannot stop
	// inside one server reply (Redis), where it may hold somewhat more; it
	// may hold fewer (even none) before the end. limit must be positive; a
	// store may lower it to [MaxListPage]. A cursor is opaque, valid only
	// for the store that returned it.
	ListPage(ctx context.Context, cursor string, limit int) (page []NamedRecord, next string, err error)
}

// MaxListPage is the largest limit a [Lister] must honour; a larger one
// may be lowered to it.
const MaxListPage = 1000

// NamedRecord is one lock of a listing and its record.
type NamedRecord struct {
	// Name is the name of the lock.
	Name string
	Record
}
