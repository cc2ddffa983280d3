package redisstore

import (
	"encoding/base64"
	"strconv"
	"strings"
	"sync"

	"github.com/simba-go/simba/lease"
)

// Key layout. All keys of one lock share the hash tag {<base64url of the
// name>}, so they live in one Redis Cluster slot and one script can touch
// them all. base64url (no padding) is injective and never yields '{', '}',
// ':' or a space, so any name works and different names never share keys.
// A name of 255 bytes gives a tag of 340 characters.
//
//	<prefix>{<tag>}:r                 the record: last token, owner, queue and hold
//	                                  flags; lives one retention after its last write,
//	                                  and always longer than the grant
//	<prefix>{<tag>}:g:<token>:<owner> the live grant; expires at its transition end
//	<prefix>{<tag>}:q                 zset: waiters by first arrival
//	<prefix>{<tag>}:qe                hash: waiter -> expiry and span
//	<prefix>{<tag>}:ev                the pub/sub channel of the lock
//	<prefix>{~<n>}:epoch              one per slot (one per server outside Redis
//	                                  Cluster), no expiry: gone only after a flush
//
// The scripts get the record key alone (and acquire's the epoch key of its
// slot) and derive the others from it (lib.lua). A renewal names the grant
// key, so it is one PEXPIRE (1: renewed, 0: not held) with no script. The
// epoch keys' tags start with '~', which base64url never yields, and are
// chosen to hash to each slot.

// recordKey returns the record key of lock, in one allocation (on the
// hot path of every operation). The scripts get it alone (acquire's the
// epoch key of its slot too) and name the lock's other keys from it, as
// this file's layout does: they share its hash tag, so its cluster slot.
func (s *Store) recordKey(name string) string {
	if len(name) > lease.MaxNameLength { // never for a valid name
		return s.tagged(name) + ":r"
	}
	var b strings.Builder
	b.Grow(len(s.cfg.prefix) + base64.RawURLEncoding.EncodedLen(len(name)) + len("{}:r"))
	s.writeTagged(&b, name)
	b.WriteString(":r")
	return b.String()
}

// writeTagged writes the prefix and hash tag of lock, a valid name, to b
// without allocating.
func (s *Store) writeTagged(b *strings.Builder, name string) {
	b.WriteString(s.cfg.prefix)
	b.WriteByte('{')
	var src [lease.MaxNameLength]byte
	var enc [(lease.MaxNameLength*4 + 2) / 3]byte
	tag := base64.RawURLEncoding.EncodedLen(len(name))
	base64.RawURLEncoding.Encode(enc[:tag], src[:copy(src[:], name)])
	b.Write(enc[:tag])
	b.WriteByte('}')
}

// grantKey names the grant with token of owner on lock, in one
// allocation (a release's GETDEL names it).
func (s *Store) grantKey(name string, token uint64, owner string) string {
	if len(name) > lease.MaxNameLength { // never for a valid name
		return s.tagged(name) + ":g:" + strconv.FormatUint(token, 10) + ":" + owner
	}
	var num [20]byte
	tok := strconv.AppendUint(num[:0], token, 10)
	var b strings.Builder
	b.Grow(len(s.cfg.prefix) + base64.RawURLEncoding.EncodedLen(len(name)) + len("{}:g::") + len(tok) + len(owner))
	s.writeTagged(&b, name)
	b.WriteString(":g:")
	b.Write(tok)
	b.WriteByte(':')
	b.WriteString(owner)
	return b.String()
}

// tagged returns the prefix and hash tag of lock.
func (s *Store) tagged(name string) string {
	return s.cfg.prefix + "{" + base64.RawURLEncoding.EncodeToString([]byte(name)) + "}"
}

// channelOf returns the pub/sub channel of lock.
func (s *Store) channelOf(name string) string { return s.tagged(name) + ":ev" }

// epochKey returns the epoch key of the slot of key: one per slot on Redis
// Cluster (a script may only touch keys of its own slot), else one.
func (s *Store) epochKey(key string) string {
	if s.cluster == nil {
		return s.epoch
	}
	return s.cfg.prefix + "{~" + strconv.FormatUint(uint64(slotTags()[slotOf(key)]), 36) + "}:epoch"
}

// slotTags gives, for each cluster slot, the smallest n whose tag "~" +
// base 36 of n hashes to it (about 170,000 CRC16s, once per process).
var slotTags = sync.OnceValue(func() *[16384]uint32 {
	var t [16384]uint32
	var seen [16384]bool
	left := len(t)
	for n := uint32(0); left > 0; n++ {
		slot := crc16("~"+strconv.FormatUint(uint64(n), 36)) % 16384
		if !seen[slot] {
			seen[slot], t[slot] = true, n
			left--
		}
	}
	return &t
})

// slotOf returns the Redis Cluster slot of key: CRC16 (XMODEM) of its hash
// tag, or of the whole key when it has none, modulo 16384.
func slotOf(key string) uint16 {
	for i := 0; i < len(key); i++ {
		if key[i] != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j > i+1 {
					key = key[i+1 : j]
				}
				return crc16(key) % 16384
			}
		}
		break
	}
	return crc16(key) % 16384
}

// crcTable is CRC-16/XMODEM by byte (polynomial 0x1021).
var crcTable = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// crc16 is CRC-16/XMODEM (initial value 0), the checksum of Redis
// Cluster's key slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^s[i]]
	}
	return crc
}
