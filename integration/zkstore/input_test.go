package zkstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/zkstore"
)

// offline returns a Session that never reaches a server (New does no I/O).
func offline(t *testing.T) *zkstore.Session {
	s, err := offlineSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestNewBadInput (S12): unusable arguments to New and Connect are typed
// errors.
func TestNewBadInput(t *testing.T) {
	sess := offline(t)
	cases := []struct {
		name string
		sess *zkstore.Session
		opts []zkstore.Option
	}{
		{"nil session", nil, nil},
		{"nil option", sess, []zkstore.Option{nil}},
		{"empty ACL", sess, []zkstore.Option{zkstore.WithACL()}},
		{"ACL without permissions", sess, []zkstore.Option{zkstore.WithACL(zk.ACL{Scheme: "world", ID: "anyone"})}},
		{"ACL with unknown permissions", sess, []zkstore.Option{zkstore.WithACL(zk.ACL{Perms: 64, Scheme: "world", ID: "anyone"})}},
		{"ACL without scheme", sess, []zkstore.Option{zkstore.WithACL(zk.ACL{Perms: zk.PermAll})}},
	}
	for _, root := range []string{"", "simba", "/", "/simba/", "//simba", "/a//b", "/a/./b", "/a/../b", "/zookeeper",
		"/zookeeper/quota", "/a\x00b", "/a\x01b", "/\xff", "/" + strings.Repeat("x", 1100)} {
		cases = append(cases, struct {
			name string
			sess *zkstore.Session
			opts []zkstore.Option
		}{"root " + root, sess, []zkstore.Option{zkstore.WithRoot(root)}})
	}
	for _, c := range cases {
		s, err := zkstore.New(c.sess, c.opts...)
		if s != nil || !errors.Is(err, lease.ErrInvalidArgument) || !strings.Contains(err.Error(), "zkstore: ") {
			t.Errorf("%s: New = %v, %v; want nil and a zkstore error wrapping ErrInvalidArgument", c.name, s, err)
		}
	}
	for _, root := range []string{"/simba", "/a/b-c/d.e", "/zookeeper2", "/ünïcode"} {
		s, err := zkstore.New(sess, zkstore.WithRoot(root), zkstore.WithACL(zk.WorldACL(zk.PermAll)...))
		if err != nil || s.Root() != root {
			t.Errorf("New with root %q = %v, %v", root, s, err)
		}
	}
	for _, c := range []struct {
		name    string
		servers []string
		timeout time.Duration
		opts    []zkstore.ConnectOption
	}{
		{"no servers", nil, time.Second, nil},
		{"zero timeout", []string{"127.0.0.1:1"}, 0, nil},
		{"negative timeout", []string{"127.0.0.1:1"}, -time.Second, nil},
		{"nil option", []string{"127.0.0.1:1"}, time.Second, []zkstore.ConnectOption{nil}},
		{"nil dialer", []string{"127.0.0.1:1"}, time.Second, []zkstore.ConnectOption{zkstore.WithDialer(nil)}},
		{"nil conn option", []string{"127.0.0.1:1"}, time.Second, []zkstore.ConnectOption{zkstore.WithConnOptions(nil)}},
	} {
		s, err := zkstore.Connect(t.Context(), c.servers, c.timeout, c.opts...)
		if s != nil || !errors.Is(err, lease.ErrInvalidArgument) {
			t.Errorf("%s: Connect = %v, %v; want nil and an error wrapping ErrInvalidArgument", c.name, s, err)
		}
	}
}

// TestCallBadInput (S12): invalid names, ids and timings are refused with
// typed errors before any request.
func TestCallBadInput(t *testing.T) {
	s, err := zkstore.New(offline(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, name := range []string{"", strings.Repeat("x", 256), "a\x00b", "\xff"} {
		if _, err := s.Acquire(ctx, name, "c", time.Second, 0); !errors.Is(err, lease.ErrInvalidName) {
			t.Errorf("Acquire(%q): %v, want ErrInvalidName", name, err)
		}
		if _, err := s.Get(ctx, name); !errors.Is(err, lease.ErrInvalidName) {
			t.Errorf("Get(%q): %v, want ErrInvalidName", name, err)
		}
		if _, err := s.Watch(ctx, name, ""); !errors.Is(err, lease.ErrInvalidName) {
			t.Errorf("Watch(%q): %v, want ErrInvalidName", name, err)
		}
	}
	for _, c := range []struct {
		contender       string
		ttl, transition time.Duration
	}{{"", time.Second, 0}, {strings.Repeat("c", 129), time.Second, 0}, {"c", 0, 0}, {"c", time.Second, -1}} {
		if _, err := s.Acquire(ctx, "m", c.contender, c.ttl, c.transition); !errors.Is(err, lease.ErrInvalidArgument) {
			t.Errorf("Acquire(%q, %v, %v): %v, want ErrInvalidArgument", c.contender, c.ttl, c.transition, err)
		}
		if _, err := s.Renew(ctx, "m", c.contender, 1, c.ttl, c.transition); !errors.Is(err, lease.ErrInvalidArgument) {
			t.Errorf("Renew(%q, %v, %v): %v, want ErrInvalidArgument", c.contender, c.ttl, c.transition, err)
		}
	}
	if err := s.Release(ctx, "m", "", 1); !errors.Is(err, lease.ErrInvalidArgument) {
		t.Errorf("Release with an empty contender: %v, want ErrInvalidArgument", err)
	}
}

// oddNames are names and ids a store must keep apart.
var oddNames = []string{"a", "A", "a/b", "a%2Fb", "a%2fb", "a-b", "a-0000000001", "a_b", "a.b", ".", "..", "...",
	"zookeeper", "/", "//", "a/", "/a", "{x}", "a b", " ", "%", "%%", "%25", "ü", "u\u0308", "日本", "🦀", "a\nb",
	"a\x01b", "\x7f", "-", "--", "~", "0000000001", strings.Repeat("é", 127)}

// TestEscape: distinct names get distinct znode names that ZooKeeper
// accepts as one path element, and a node name gives its contender back.
// ("zookeeper" stays as it is: only /zookeeper is reserved, and the root
// is never /.)
func TestEscape(t *testing.T) {
	seen := map[string]string{}
	for _, n := range oddNames {
		e := escape(n)
		if prev, ok := seen[e]; ok {
			t.Errorf("%q and %q both escape to %q", prev, n, e)
		}
		seen[e] = n
		if e == "" || e == "." || e == ".." || strings.ContainsAny(e, "/-.") {
			t.Errorf("escape(%q) = %q: not one safe znode name", n, e)
		}
		for _, r := range e {
			if r < 0x21 || r > 0x7e {
				t.Errorf("escape(%q) = %q holds %U", n, e, r)
			}
		}
		if id, ok := parseChild(e + "-0000000042"); !ok || id != n {
			t.Errorf("ParseChild(escape(%q)) = %q, %v", n, id, ok)
		}
	}
	for _, bad := range []string{"", "a", "-0000000001", "a-", "a-x", "%zz-0000000001", "%4-0000000001", "a%2fb-0000000001", "a.b-0000000001", "%41-0000000001"} {
		if id, ok := parseChild(bad); ok {
			t.Errorf("ParseChild(%q) = %q, want not ours", bad, id)
		}
	}
}

// TestCorruptNode (S12): a node in a lock's queue whose data this package
// did not write (another program, another version) neither panics nor is
// taken for a grant of this package's: Get reports ErrCorrupt; a waiter
// behind it names the contender its name carries, and gets the lock when
// the node's session ends; a node whose name is not ours is ignored.
func TestCorruptNode(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	s := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	foreign := connect(t, srv.Servers(), tckSession)
	ctx := t.Context()
	const name = "s12/corrupt"
	const ttl, transition = 300 * time.Millisecond, 200 * time.Millisecond
	first, err := s.Acquire(ctx, name, "first", ttl, transition) // makes the dir
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, name, "first", first.Token); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"junk-", "notours"} {
		if _, err := foreign.Conn().Create(dir(s, name)+"/"+n, []byte("garbage"), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Get(ctx, name); !errors.Is(err, zkstore.ErrCorrupt) {
		t.Errorf("Get with a corrupt lowest node: %v, want ErrCorrupt", err)
	}
	rec, err := s.Acquire(ctx, name, "c", ttl, transition)
	if err != nil || rec.OwnerID != "junk" || rec.Token == 0 || rec.Transition != ttl+transition {
		t.Fatalf("Acquire behind a corrupt node = %+v, %v; want owner junk with the caller's timings", rec, err)
	}
	foreign.Close() // its nodes go with its session
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, err := s.Acquire(ctx, name, "c", ttl, transition)
		if err != nil {
			t.Fatalf("Acquire after the corrupt node's session ended: %v", err)
		}
		if rec.Held("c") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lock is still held after the corrupt node's session ended: %+v", rec)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestACL: nodes get the Store's ACL; a session with the credentials
// works, one without them gets ZooKeeper's error, wrapped, and no panic.
func TestACL(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	ctx := t.Context()
	root := srv.Root() + "/acl"
	acl := zk.DigestACL(zk.PermAll, "simba", "secret")
	withAuth := connect(t, srv.Servers(), tckSession)
	if err := withAuth.Conn().AddAuth("digest", []byte("simba:secret")); err != nil {
		t.Fatal(err)
	}
	s, err := zkstore.New(withAuth, zkstore.WithRoot(root), zkstore.WithACL(acl...))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.Acquire(ctx, "guarded", "a", time.Second, time.Second)
	if err != nil || !rec.Held("a") {
		t.Fatalf("Acquire with credentials = %+v, %v", rec, err)
	}
	got, _, err := withAuth.Conn().GetACL(dir(s, "guarded"))
	if err != nil || len(got) != 1 || got[0].Scheme != "digest" {
		t.Errorf("ACL of the lock's znode = %+v, %v; want the Store's digest ACL", got, err)
	}
	other := newStore(t, connect(t, srv.Servers(), tckSession), root)
	if _, err := other.Acquire(ctx, "guarded", "b", time.Second, time.Second); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("Acquire without credentials: %v, want an error wrapping zk.ErrNoAuth", err)
	}
	if _, err := other.Get(ctx, "guarded"); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("Get without credentials: %v, want an error wrapping zk.ErrNoAuth", err)
	}
	if err := s.Release(ctx, "guarded", "a", rec.Token); err != nil {
		t.Errorf("Release: %v", err)
	}
	// Leave nothing an unauthenticated clean-up could not delete.
	for _, p := range []string{dir(s, "guarded"), root} {
		if err := withAuth.Conn().Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Errorf("delete %s: %v", p, err)
		}
	}
}
