package lease

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNameLength is the longest mutex name, in bytes, that every store
// accepts.
const MaxNameLength = 255

// MaxContenderIDLength is the longest contender id, in bytes.
const MaxContenderIDLength = 128

// ValidateName reports whether name can name a mutex: 1 to [MaxNameLength]
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

// validateContenderID checks an id given to WithContenderID.
func validateContenderID(id string) error {
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
