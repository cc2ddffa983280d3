// Package zkstore is a [lease.Store] on Apache ZooKeeper (3.5 or later),
// over a [Session] opened by [Connect]. It is also a [lease.Watcher]
// (ZooKeeper watches) and a [lease.BatchRenewer] (renewals send nothing).
//
//	sess, err := zkstore.Connect(ctx, servers, 10*time.Second)
//	...
//	defer sess.Close()
//	store, err := zkstore.New(sess)
//	m, err := lease.NewManager(store, store.LeaseOptions()...)
//
// # Sessions
//
// A grant lives with its holder's session, so the Store must know for
// certain when that session may expire. Connect opens the session on a
// *zk.Conn (github.com/go-zookeeper/zk) and reads the client protocol off
// the wire: the session timeout the server granted (it clamps the one
// asked for into its minSessionTimeout and maxSessionTimeout, and
// go-zookeeper does not tell which), and which heartbeats were answered.
//
// go-zookeeper pings every third of the timeout. On a Session's conn each
// ping goes out as a sync of "/" under the ping's xid (go-zookeeper
// ignores both replies alike): a follower answers a ping by itself, even
// cut off from its leader, which is the one that expires sessions, but a
// sync only after hearing from the leader. The leader expires a session
// no sooner than the timeout after it last heard of the client, and it
// hears of a heartbeat through the follower's next report to it (every
// half tick), not from the forwarded sync; the answer to a sync proves
// that the reports sent before it arrived, among them the one of the
// heartbeat before (a third of the timeout, more than half a tick,
// earlier). So the session surely lives until the send time of the
// heartbeat before the last one answered, or of the connect request,
// plus the timeout. [Session.Timeout] and [Store.MaxGrant] report the
// granted timeout; [Session.Conn] serves the application's own requests.
//
// # Nodes
//
// Each lock is a container znode under the root (default /simba), its
// name escaped into one znode name ("orders/42" becomes "orders%2F42").
// Each contender that wants the lock has one ephemeral sequential node
// in it, named after its escaped contender id ("<id>-0000000007"), whose
// data holds the contender id, its ttl and transition. The first node in
// sequence order owns the lock; the others wait in line (FIFO), and an
// Acquire that finds its node first takes the lock without a write. A
// waiter watches the node just ahead of its own, so a release wakes one
// waiter, not the herd. Anyone can read who owns: Get, and the Record of
// a losing Acquire, name the owner.
//
// The fencing token is the owner node's czxid, the zxid of its creation
// (read off the create's reply): grants go to nodes in creation order,
// and zxids only grow, across leader changes, restarts and the reaping of
// an empty container znode, after which sequence numbers start over.
//
// Since a node's name carries its contender id, an Acquire retried after
// a lost reply finds the node its first attempt created (one of its own
// session) instead of leaving a second one; duplicates and nodes of the
// same id left by another session are deleted. A call that gives up
// before its request went out never sends it, and the next Acquire or
// Release of the same lock and contender waits (within its context) for a
// create that may still be sent or answered, so that its listing shows
// the node.
//
// # Leases
//
// A grant is its holder's node, which no client but the holder's Store
// deletes. It ends at the first of three events:
//
//   - The holder's Release deletes the node.
//   - The holder's session expires: the server deletes its ephemeral
//     nodes (a holder that crashed, was stopped, or is cut off).
//   - The holder's Manager stops calling: the Store's watchdog deletes the
//     node once ttl + transition passed after the last Acquire or Renew
//     of it (a holder that hangs while its process and session live on).
//
// Renew is thus a promise the Store keeps by itself, and sends no request
// (see [Store.Renew]). The holder is told the smaller bound: the
// Transition of its Acquire's or Renew's record is min(ttl + transition,
// what surely remains of the session), and its TTL min(ttl, Transition),
// so its deadline (see package lease) passes before the watchdog or the
// server could free the lock. While heartbeats are answered, what surely
// remains of the session is between a third and two thirds of its
// timeout, so records often report less than ttl + transition (always,
// with [Store.LeaseOptions]): the Store contract lets a
// [lease.GrantLimiter] do so, as long as it reports no more than
// MaxGrant. After the session expired the node is gone: Renew fails with
// [lease.ErrNotHeld] and the Manager acquires anew, with a new node and a
// larger czxid. A node of an expired session is never reused.
//
// Pick the Manager's ttl + transition equal to the session timeout
// ([Store.LeaseOptions] does): then a hung holder and a dead or cut-off
// one are taken over after about the same time. Longer timings are cut to
// the session timeout ([Store.MaxGrant]), and the safety margin must stay
// well below it, or every grant is lost as it is made; shorter ones take
// a hung holder over sooner than session expiry.
//
// A waiter's node is the watchdog's too. The Store waits for its Manager's
// polls (at the owner's ttl + transition) and, once its turn has come, for
// its Acquire within its own ttl + transition; a waiter that does not come
// is withdrawn, and the next in line gets the lock.
//
// Holders renew without writing, so nobody else can see how much is left
// of a grant: the Record of a waiter, and Get, report the owner's whole
// ttl and transition, the longest it keeps the lock without a call. Get
// through the holder's own Store reports the time left of the grant, until
// the watchdog would delete it, which shrinks as time passes.
//
// # Cost
//
// Requests per call (go test -bench . ./zkstore/ in the integration
// module): an uncontended Acquire 2 (create, list; 5 in 3 round trips
// when the lock's znode is missing: both fail, the znode is created, and
// the create and the listing go out again) in one round trip when the
// lock's znode exists
// (the listing goes out right behind the create, which the server runs
// first), Renew none (a listing after the queue
// changed, to notice a node deleted by hand, and the first time when the
// queue is not watched yet), Release 1 (delete; a Release of a grant
// this Store did not make 4: sync, list, read, delete), the Acquire of a waiter
// whose turn came none (its subscription saw the turn come), a poll 1
// (list) by the next in line and none by waiters further back, Get 3
// (sync, list, read). A hand-off costs 1 on its way, the delete, when the
// next waiter watched the owner itself (the watch's event says its node
// is first now), and 2 otherwise (the delete, and its listing). A waiter
// watches the owner when it came in line right behind it, and when the
// node ahead of it announced that its turn came: a waiter whose turn
// comes writes its node's data again, unchanged (1 request, in the
// background), which fires the watch of the waiter behind it; that one
// lists the queue and reads and watches the new owner (2 requests) while
// the lock is held, and its own turn then comes with the delete's event.
// Queueing
// costs 3 or 4 (create, list, read and watch the owner and the node
// ahead), in 2 round trips when the lock's znode exists: the
// read of the owner and the watch on the node ahead of a waiter further
// back go out together. Holding and waiting cost the server nothing beyond the
// session's heartbeats.
//
// The listing of an Acquire watches the queue for the grant's renewals at
// no cost, but the holder's own Release then fires the watch, and the
// server sends the event ahead of the delete's reply: a lock whose last
// grant here ended before any renewal (a lock taken and released in a
// loop) is left unwatched, and the first renewal of its next grant, if
// one comes, lists and watches it. An uncontended cycle then costs what
// go-zookeeper's lock recipe costs: three requests and three replies.
//
// # Caveats
//
// Run only one version of this package on a root: versions before this
// one judged a grant's lapse by the mtime of its node, which holders no
// longer write; their waiters would delete live grants of this one.
//
// The session's bound assumes a timeout of at least two ticks (the
// server's default minimum) and a leader that does not stall between two
// heartbeats: a leader paused long enough by its own GC may expire
// sessions on waking before it reads what its followers told it, for
// every client alike. Then only fencing covers that fault.
//
// The grant of a Store whose watchdog cannot delete a node (its
// credentials may create but not delete) lasts until its session ends.
// Tokens never repeat as long as ZooKeeper keeps its transaction log
// (forceSync=yes, the default): a server that loses acknowledged
// transactions can reuse a zxid.
//
// go-zookeeper requests take no context: a call whose context ends
// returns at once, and its request finishes in the background when the
// conn answers or fails it.
package zkstore
