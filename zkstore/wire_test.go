package zkstore

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// frame returns a length-prefixed frame of the given big-endian fields.
func frame(fields ...any) []byte {
	var body bytes.Buffer
	for _, f := range fields {
		switch v := f.(type) {
		case string:
			_ = binary.Write(&body, binary.BigEndian, int32(len(v)))
			body.WriteString(v)
		default:
			_ = binary.Write(&body, binary.BigEndian, v)
		}
	}
	out := binary.BigEndian.AppendUint32(nil, uint32(body.Len()))
	return append(out, body.Bytes()...)
}

// fakeServer is the far end of a tapConn: it reads what the client sends
// and writes replies in pieces of one byte, as a slow network might.
type fakeServer struct {
	t    *testing.T
	conn net.Conn
}

func (f fakeServer) read(n int) []byte {
	f.t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(f.conn, b); err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f fakeServer) write(b []byte) {
	for i := range b {
		if _, err := f.conn.Write(b[i : i+1]); err != nil {
			f.t.Error(err)
			return
		}
	}
}

// TestTapWire: the tap swaps pings for syncs, reads the granted timeout
// and session from the connect response, records the zxids of creates,
// tells who waits for a create's request that it went out, and moves
// the session's anchor to the heartbeat before the one just
// answered (the leader surely heard of that one), whatever the pieces the
// replies arrive in.
func TestTapWire(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	tp := newTap()
	tc := newTapConn(client, tp)
	srv := fakeServer{t, server}
	const sid = int64(0x0100000000000042)

	// The client's side runs in its own goroutine: net.Pipe is unbuffered.
	write := func(b []byte) {
		go func() {
			if _, err := tc.Write(b); err != nil {
				t.Error(err)
			}
		}()
	}
	read := func(n int) {
		b := make([]byte, n)
		if _, err := io.ReadFull(tc, b); err != nil {
			t.Fatal(err)
		}
	}

	connectReq := frame(int32(0), int64(0), int32(12000), int64(0), "0123456789abcdef")
	before := time.Now()
	write(connectReq)
	if got := srv.read(len(connectReq)); !bytes.Equal(got, connectReq) {
		t.Fatalf("connect request sent as %x", got)
	}
	resp := frame(int32(0), int32(6000), sid, "0123456789abcdef")
	go srv.write(resp)
	read(len(resp))
	st := tp.state()
	if st.sid != sid || st.timeout != 6*time.Second || st.anchor.Before(before) {
		t.Fatalf("after the connect response: %+v; want session %x, timeout 6s, anchored at the request", st, sid)
	}
	connected := st.anchor

	ping := frame(int32(-2), int32(opPing))
	pingReply := frame(int32(-2), int64(7), int32(0), "/")
	var sends []time.Time // just before each ping was written
	for i := range 4 {
		time.Sleep(time.Millisecond) // distinct send times
		sends = append(sends, time.Now())
		write(ping)
		if got := srv.read(len(heartbeat)); !bytes.Equal(got, heartbeat) {
			t.Fatalf("ping %d sent as %x, want the heartbeat %x", i, got, heartbeat)
		}
		go srv.write(pingReply)
		read(len(pingReply))
		a := tp.state().anchor
		switch {
		case i == 0 && !a.Equal(connected):
			t.Errorf("after the first heartbeat the anchor moved from the connect request to %v", a)
		case i > 0 && (a.Before(sends[i-1]) || !a.Before(sends[i])):
			t.Errorf("after heartbeat %d the anchor is %v after the connect request, want the send time of heartbeat %d (%v..%v)",
				i, a.Sub(connected), i-1, sends[i-1].Sub(connected), sends[i].Sub(connected))
		}
	}

	otherWait := &sendWait{path: "/a/c-", sent: make(chan struct{})}
	tp.awaitCreate(otherWait)
	defer tp.stopWait(otherWait)
	other := otherWait.sent
	wait := &sendWait{path: "/a/b-", sent: make(chan struct{})}
	tp.awaitCreate(wait)
	defer tp.stopWait(wait)
	sent := wait.sent
	create := frame(int32(5), int32(opCreate), "/a/b-", "", int32(0), int32(3))
	write(create)
	if got := srv.read(len(create)); !bytes.Equal(got, create) {
		t.Fatalf("create sent as %x", got)
	}
	select {
	case <-sent:
	case <-time.After(10 * time.Second):
		t.Error("the create of /a/b- went out, its waiter was not told")
	}
	select {
	case <-other:
		t.Error("the waiter for a create of /a/c- was told of /a/b-")
	default:
	}
	createReply := frame(int32(5), int64(0x1234), int32(0), "/a/b-0000000001")
	go srv.write(createReply)
	read(len(createReply))
	if z, ok := tp.takeCreate("/a/b-0000000001"); !ok || z != 0x1234 {
		t.Errorf("czxid of the create = %x, %v; want 1234", z, ok)
	}

	// A session the server says expired.
	tp.connected(0, 6*time.Second, time.Now())
	if st := tp.state(); st.sid != 0 || st.left(time.Now()) > 0 {
		t.Errorf("after an expired session: %+v, want none", st)
	}
}

// TestTapRefusesSessionWithoutTimeout: a connect response that grants a
// session with a timeout of 0 fails the connection instead of reaching
// go-zookeeper, whose send loop would start its ping ticker at interval
// 0 and panic, taking the process down (seen in a 30-minute make chaos
// run: "panic: non-positive interval for NewTicker" in
// zk.(*Conn).sendLoop). The client is go-zookeeper itself, dialling a
// server that answers every connect that way.
func TestTapRefusesSessionWithoutTimeout(t *testing.T) {
	tp := newTap()
	dials := make(chan struct{}, 100)
	dialer := func(network, address string, timeout time.Duration) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			var n [4]byte
			if _, err := io.ReadFull(server, n[:]); err != nil {
				return
			}
			if _, err := io.ReadFull(server, make([]byte, binary.BigEndian.Uint32(n[:]))); err != nil {
				return
			}
			// The client may close as soon as it read enough of it.
			_, _ = server.Write(frame(int32(0), int32(0), int64(0x0100000000000042), "0123456789abcdef"))
			_, _ = io.Copy(io.Discard, server)
		}()
		select {
		case dials <- struct{}{}:
		default:
		}
		return newTapConn(client, tp), nil
	}
	c, _, err := zk.Connect([]string{"127.0.0.1:1"}, 6*time.Second, zk.WithDialer(dialer), zk.WithLogger(discardLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Three connects refused in turn: without the guard the first one's
	// send loop has panicked by the time the second is dialled.
	for range 3 {
		select {
		case <-dials:
		case <-time.After(time.Minute):
			t.Fatal("go-zookeeper did not dial again after the refused connect")
		}
	}
	if st := tp.state(); st.sid != 0 {
		t.Errorf("the tap took session %x from a response without a timeout", st.sid)
	}
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}
