package chaos

import (
	"testing"

	"github.com/simba-go/simba/internal/testserver"
)

// TestMain stops the test servers and checks for leaked goroutines.
func TestMain(m *testing.M) { testserver.VerifyTestMain(m) }
