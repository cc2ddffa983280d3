package chaos

import (
	"os"
	"testing"

	"github.com/simba-go/simba/integration/testserver"
)

// TestMain stops the test servers and checks for leaked goroutines. Started
// by a campaign as a contender process, the test binary is that process
// instead (see child).
func TestMain(m *testing.M) {
	if IsChild() {
		os.Exit(ChildMain(childStore))
	}
	testserver.VerifyTestMain(m)
}
