package redisstore

import "encoding/base64"

// Key layout. All keys of one mutex share the hash tag {<base64url of the
// name>}, so they live in one Redis Cluster slot and one script can touch
// them all. base64url (no padding) is injective and never yields '{', '}',
// ':' or a space, so any name works and different names never share keys.
// A name of 255 bytes gives a tag of 340 characters.
//
//	<prefix>{<tag>}:lock   hash: owner, token, transition; expires at the transition end
//	<prefix>{<tag>}:token  the fencing counter; expires one retention after the last grant
//	<prefix>{<tag>}:queue  zset: waiters by first arrival
//	<prefix>{<tag>}:qexp   hash: waiter -> expiry and span
//	<prefix>{<tag>}:hold   hash: the waiter a freed mutex is held back for
//	<prefix>{<tag>}:ev     the pub/sub channel of the mutex

// keys are the keys of one mutex, in the order the scripts expect (see
// lib.lua), the channel last.
type keys [6]string

func (s *Store) keysOf(mutex string) keys {
	base := s.tagged(mutex)
	return keys{base + ":lock", base + ":token", base + ":queue", base + ":qexp", base + ":hold", base + ":ev"}
}

// tagged returns the prefix and hash tag of mutex.
func (s *Store) tagged(mutex string) string {
	return s.cfg.prefix + "{" + base64.RawURLEncoding.EncodeToString([]byte(mutex)) + "}"
}

// channelOf returns the pub/sub channel of mutex.
func (s *Store) channelOf(mutex string) string { return s.tagged(mutex) + ":ev" }

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

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the
// checksum of Redis Cluster's key slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
