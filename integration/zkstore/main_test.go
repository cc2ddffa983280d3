package zkstore_test

import (
	"testing"

	"github.com/simba-go/simba/integration/testserver"
)

func TestMain(m *testing.M) { testserver.VerifyTestMain(m) }
