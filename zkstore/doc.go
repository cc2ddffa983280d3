// Package zkstore is a [lease.Store] on Apache ZooKeeper (3.5 or later),
// over a *zk.Conn (github.com/go-zookeeper/zk) that the caller owns. It
// is also a [lease.Watcher] (ZooKeeper watches) and a
// [lease.BatchRenewer] (one multi request renews all of a Manager's
// grants).
//
//	conn, _, err := zk.Connect(servers, 10*time.Second)
//	...
//	store, err := zkstore.New(conn, 10*time.Second) // the session timeout
//	m, err := lease.NewManager(store, store.LeaseOptions()...)
//
// # Nodes
//
// Each mutex is a container znode under the root (default /simba), its
// name escaped into one znode name ("orders/42" becomes "orders%2F42").
// Each contender that wants the mutex has one ephemeral sequential node
// in it, named after its escaped contender id ("<id>-0000000007"), whose
// data holds the contender id, its ttl and transition, and whether it has
// claimed the mutex. The lowest sequence is next in line or owns: FIFO.
// A waiter's watch is on the node just ahead of its own, so a release
// wakes one waiter, not the herd. Anyone can read who owns: Get, and the
// Record of a losing Acquire, name the owner.
//
// The fencing token is the owner node's czxid, the zxid of its creation:
// grants go to nodes in creation order, and zxids only grow, across
// leader changes and restarts.
//
// Since a node's name carries its contender id, an Acquire retried after
// a lost reply finds the node its first attempt created (one of its own
// session) instead of leaving a second one; duplicates and nodes of the
// same id left by another session are deleted.
//
// # Leases and sessions
//
// A grant ends at the first of three events:
//
//   - Its holder's Release deletes the node.
//   - The holder's session expires: the server deletes its ephemeral
//     nodes. That happens no sooner than the session timeout after the
//     server last heard from the holder, which is after the holder sent
//     its last confirmed call.
//   - Its ttl + transition pass on the server's clock without a renewal:
//     Renew rewrites the node, so its mtime is the server's time of the
//     last renewal, and the next waiter's Acquire, which learns the
//     server's time from its own write, deletes a lapsed owner's node
//     (conditionally on its version, so a renewal in between wins). This
//     frees mutexes of holders that hang while their process, and so
//     their session, lives on.
//
// The holder is told the smaller bound: a Record's Transition is
// min(ttl + transition, session timeout), so its deadline (see package
// lease) passes before either could free the mutex for someone else —
// Disconnected starts no clock of its own, the clock already runs from
// the last confirmed renewal. After Expired the node is gone: Renew fails
// with [lease.ErrNotHeld] and the Manager acquires anew, with a new node
// and a larger czxid. A node of an expired session is never reused.
//
// Pick the Manager's ttl + transition equal to the session timeout
// ([Store.LeaseOptions] does): then a hung holder and a dead one are
// taken over after the same time. Longer timings are clamped to the
// session timeout; safety = max(transition/2, ttl/10) must stay well
// below it, or every grant is lost as it is made.
//
// A lowest node that was not claimed yet (its waiter is on its way) has
// ttl + transition from when it became the lowest; meanwhile the mutex is
// reported held back for it (an empty Owner with a positive Transition).
//
// # Cost
//
// Requests per call (go test -bench . ./zkstore/): an uncontended
// Acquire 3 (create, list, claim; 5 the first time, creating the mutex's
// znode), Renew 1 (a conditional write; one multi for all renewals of a
// Manager that are due together), Release 1 (a multi: delete and
// stamp), the Acquire of a waiter whose turn came 2, a waiter's poll
// while the mutex is held 5 (it syncs its server with the leader before
// concluding it lost), Get 3 (sync, list, read). A release reaches the
// next waiter in another process in about 2–3 ms on a local server.
//
// # Caveats
//
// Lapse is judged on the wall clock of the ZooKeeper server that leads
// when each write commits (a node's mtime): keep the ensemble's clocks in
// sync (NTP), as the SQL stores need a sane database clock. A step of the
// leader's clock, or a new leader whose clock differs, moves lapses by as
// much; the holder's safety margin absorbs small differences. Session
// expiry does not depend on wall clocks. Tokens never repeat as long as
// ZooKeeper keeps its transaction log (forceSync=yes, the default): a
// server that loses acknowledged transactions can reuse a zxid.
//
// go-zookeeper requests take no
// context: a call whose context ends returns at once, and its request
// finishes in the background when the conn answers or fails it.
package zkstore
