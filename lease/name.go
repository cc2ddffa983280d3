package lease

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxNameLength is the longest lock name, in bytes, that every store
// accepts.
const MaxNameLength = 255

// MaxContenderIDLength is the longest contender id, in bytes.
const MaxContenderIDLength = 128

// ValidateName reports whether name can name a lock: 1 to [MaxNameLength]
// bytes of valid UTF-8 without NUL. Any other byte, including '/', '{', '}',
// ':' and spaces, is allowed; stores encode names as they need. The error
// wraps [ErrInvalidName].
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > MaxNameLength:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidName, len(name), MaxNameLength)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidName)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: contains NUL", ErrInvalidName)
	}
	return nil
}

// ValidateContenderID reports whether id can be a contender id: 1 to
// [MaxContenderIDLength] bytes of valid UTF-8 without NUL, as
// [WithContenderID] requires and every Store accepts. The error wraps
// [ErrInvalidArgument].
func ValidateContenderID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty contender id", ErrInvalidArgument)
	case len(id) > MaxContenderIDLength:
		return fmt.Errorf("%w: contender id of %d bytes, more than %d", ErrInvalidArgument, len(id), MaxContenderIDLength)
	case !utf8.ValidString(id) || strings.IndexByte(id, 0) >= 0:
		return fmt.Errorf("%w: contender id is not valid UTF-8 without NUL", ErrInvalidArgument)
	}
	return nil
}

// ValidateRequest checks the arguments of a Store's Acquire or Renew
// against what the Store contract promises (a valid name and contender
// id, ttl of at least a millisecond, transition not negative), for Store
// implementations that must not trust their caller. The error wraps
// [ErrInvalidName] or [ErrInvalidArgument].
func ValidateRequest(name, contender string, ttl, transition time.Duration) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := ValidateContenderID(contender); err != nil {
		return err
	}
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: ttl %v is less than 1ms", ErrInvalidArgument, ttl)
	}
	if transition < 0 {
		return fmt.Errorf("%w: transition %v is negative", ErrInvalidArgument, transition)
	}
	return nil
}
