package zkstore

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The ZooKeeper client protocol as this package reads it off a
// go-zookeeper connection: every frame is a 4-byte big-endian length and
// a payload. A connection starts with the connect request and its
// response (protocol version, negotiated timeout, session id, password);
// then requests (xid, opcode, body) and replies (xid, zxid, error, body).
const (
	opCreate          = 1
	opSync            = 9
	opPing            = 11
	opCreate2         = 15
	opCreateContainer = 19
	opCreateTTL       = 21
	xidPing           = -2
	replyHeader       = 16      // xid, zxid, error
	maxCapture        = 8 << 10 // longest created path whose zxid is recorded
)

// heartbeat is the request that replaces go-zookeeper's ping (a 12-byte
// frame: xid -2, opcode 11) on the wire: a sync of "/" under the same xid.
// A ping is answered by whichever server the client is connected to; a
// sync only once that server has heard from the ensemble's leader, which
// decides session expiry. go-zookeeper ignores every reply with xid -2.
var heartbeat = []byte{0, 0, 0, 13, 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, opSync, 0, 0, 0, 1, '/'}

// tapConn is one TCP connection of a Session's *zk.Conn, seen by the
// Session's tap: it swaps pings for heartbeats, and reports the connect
// response, answered heartbeats and the zxids of creates.
//
// go-zookeeper writes each frame with one Write. A Write that is not a
// sequence of whole frames makes the connection blind: its bytes pass
// unchanged and nothing it carries is trusted, so no lease rests on it.
type tapConn struct {
	net.Conn
	t     *tap
	blind atomic.Bool // the stream could not be followed

	wmu     sync.Mutex // one writer at a time
	started bool       // the connect request was written

	pmu     sync.Mutex
	sent    time.Time      // when the connect request was written
	beat    time.Time      // send time of the latest answered heartbeat (or the connect request)
	sid     int64          // this connection's session, from its connect response
	pings   []time.Time    // heartbeats awaiting their reply, oldest first
	creates map[int32]bool // creates awaiting their reply, by xid

	rmu sync.Mutex // one reader at a time
	in  frameReader

	reached   bool       // a connect response came (guarded by pmu)
	refused   bool       // it granted a session with no timeout (guarded by pmu)
	onClose   func(bool) // told whether one came, once
	closeOnce sync.Once
}

func newTapConn(c net.Conn, t *tap) *tapConn {
	return &tapConn{Conn: c, t: t, creates: map[int32]bool{}}
}

// Write implements net.Conn.
func (c *tapConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.Conn.Write(c.outgoing(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// outgoing returns the bytes to send for b, noting the requests the tap
// follows. Times are taken before the bytes leave.
func (c *tapConn) outgoing(b []byte) []byte {
	if c.blind.Load() {
		return b
	}
	if !c.started {
		c.started = true
		if frameLen(b) != len(b) {
			c.setBlind()
			return b
		}
		c.pmu.Lock()
		c.sent = time.Now()
		c.pmu.Unlock()
		return b
	}
	var out []byte // nil while b passes unchanged
	for off := 0; off < len(b); {
		n := frameLen(b[off:])
		if n < 12 || off+n > len(b) {
			c.setBlind()
			if out != nil {
				return append(out, b[off:]...)
			}
			return b
		}
		f := b[off : off+n]
		xid, op := int32(binary.BigEndian.Uint32(f[4:])), int32(binary.BigEndian.Uint32(f[8:]))
		switch {
		case n == 12 && xid == xidPing && op == opPing:
			if out == nil {
				out = append([]byte(nil), b[:off]...)
			}
			out = append(out, heartbeat...)
			c.pmu.Lock()
			c.pings = append(c.pings, time.Now())
			c.pmu.Unlock()
		default:
			if op == opCreate || op == opCreate2 || op == opCreateContainer || op == opCreateTTL {
				c.pmu.Lock()
				c.creates[xid] = true
				c.pmu.Unlock()
				if c.t.awaiting.Load() > 0 && n >= 16 {
					if pl := int(int32(binary.BigEndian.Uint32(f[12:]))); pl >= 0 && 16+pl <= n {
						c.t.createSent(f[16 : 16+pl])
					}
				}
			}
			if out != nil {
				out = append(out, f...)
			}
		}
		off += n
	}
	if out == nil {
		return b
	}
	return out
}

func (c *tapConn) setBlind() { c.blind.Store(true) }

// frameLen returns the length of the frame at the start of b, its
// 4-byte length prefix included, or -1 when b holds no length.
func frameLen(b []byte) int {
	if len(b) < 4 {
		return -1
	}
	n := binary.BigEndian.Uint32(b)
	if n > 1<<30 {
		return -1
	}
	return 4 + int(n)
}

// Read implements net.Conn.
func (c *tapConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.in.feed(p[:n], c.frame)
		c.pmu.Lock()
		refused := c.refused
		c.pmu.Unlock()
		if refused {
			c.Conn.Close()
			return 0, errNoTimeout
		}
	}
	return n, err
}

// errNoTimeout fails a connection whose connect response grants a session
// with a timeout of zero or less: go-zookeeper would start its ping ticker
// at that interval and panic ("non-positive interval for NewTicker"),
// taking the application down; failed instead, the connect is retried.
var errNoTimeout = errors.New("zkstore: the server granted a session without a timeout")

// frame handles the captured start of one received frame (the connect
// response first, then replies) and returns how many bytes of it it
// needs captured, 0 when it has enough.
func (c *tapConn) frame(index int, head []byte, size int) int {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if index == 0 {
		c.reached = true
		if len(head) >= 16 && !c.blind.Load() {
			c.sid = int64(binary.BigEndian.Uint64(head[8:]))
			timeout := time.Duration(int32(binary.BigEndian.Uint32(head[4:]))) * time.Millisecond
			if c.sid != 0 && timeout <= 0 {
				c.refused = true
				return 0
			}
			c.beat = c.sent
			c.t.connected(c.sid, timeout, c.sent)
		}
		return 0
	}
	if len(head) < replyHeader {
		return 0
	}
	xid := int32(binary.BigEndian.Uint32(head))
	zxid := int64(binary.BigEndian.Uint64(head[4:]))
	failed := binary.BigEndian.Uint32(head[12:]) != 0
	switch {
	case xid == xidPing:
		if len(c.pings) > 0 {
			sent := c.pings[0]
			c.pings = c.pings[1:]
			if !failed && !c.blind.Load() {
				// The leader surely knows of the heartbeat before this one:
				// see tap.heartbeat.
				c.t.heartbeat(c.sid, c.beat)
				c.beat = sent
			}
		}
	case c.creates[xid]:
		if failed || size < replyHeader+4 {
			delete(c.creates, xid)
			return 0
		}
		if len(head) < replyHeader+4 {
			return replyHeader + 4 // the path's length comes next
		}
		pl := int(int32(binary.BigEndian.Uint32(head[replyHeader:])))
		if pl < 0 || pl > maxCapture || replyHeader+4+pl > size {
			delete(c.creates, xid)
			return 0
		}
		if len(head) < replyHeader+4+pl {
			return replyHeader + 4 + pl
		}
		delete(c.creates, xid)
		c.t.created(string(head[replyHeader+4:]), zxid)
	}
	return 0
}

// frameReader follows the frames of a byte stream read in pieces of any
// size, capturing only the start of each frame that its handler asks for.
type frameReader struct {
	lenBuf [4]byte
	lenN   int
	size   int    // payload length of the current frame
	seen   int    // payload bytes of the current frame read so far
	want   int    // payload bytes to capture
	head   []byte // captured start of the payload
	index  int    // frames started before the current one
}

// feed consumes b. handle is called whenever the capture of the current
// frame reaches what was wanted (at first the reply header); it returns
// how many payload bytes it needs in all, or anything smaller when it is
// done with the frame.
func (r *frameReader) feed(b []byte, handle func(index int, head []byte, size int) int) {
	for len(b) > 0 {
		if r.lenN < 4 {
			k := copy(r.lenBuf[r.lenN:], b)
			r.lenN += k
			b = b[k:]
			if r.lenN == 4 {
				r.size = int(binary.BigEndian.Uint32(r.lenBuf[:]))
				r.seen, r.head, r.want = 0, r.head[:0], min(r.size, replyHeader)
				r.endIfDone()
			}
			continue
		}
		if r.want > len(r.head) {
			k := min(len(b), r.want-len(r.head))
			r.head = append(r.head, b[:k]...)
			r.seen += k
			b = b[k:]
			if len(r.head) == r.want {
				if more := handle(r.index, r.head, r.size); more > r.want && more <= r.size {
					r.want = more
				} else {
					r.want = 0
				}
			}
		} else {
			k := min(len(b), r.size-r.seen)
			r.seen += k
			b = b[k:]
		}
		r.endIfDone()
	}
}

// endIfDone moves on to the next frame once the current one was read.
func (r *frameReader) endIfDone() {
	if r.lenN == 4 && r.seen == r.size {
		r.index++
		r.lenN = 0
	}
}
