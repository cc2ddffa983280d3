package sqlstore_test

import (
	"strings"
	"testing"

	mydb "github.com/simba-go/simba/internal/db/mysql"
)

// TestMySQLAcquireDecidesOnce (issue 18): the ON DUPLICATE KEY UPDATE of
// the acquire (the path of every acquire of an existing row) evaluates the
// decision and the enqueue condition once each, keeping the outcome in
// LAST_INSERT_ID (4: lost and queued), instead of once for the version
// and once again for the insert id or the queue. The server evaluates
// every expression of a prepared statement's tree on each execution:
// measured on MariaDB 10.11, the two copies cost about a tenth of the
// server CPU of an uncontended acquire + release cycle. Before, each
// appeared twice.
func TestMySQLAcquireDecidesOnce(t *testing.T) {
	_, upd, ok := strings.Cut(mydb.Acquire, "ON DUPLICATE KEY UPDATE")
	if !ok {
		t.Fatal("Acquire has no ON DUPLICATE KEY UPDATE")
	}
	for what, expr := range map[string]string{
		"the extension test of the decision": "simba_mutex.owner_id = VALUES(owner_id),",
		"the lapsed-reservation test":        "simba_mutex.ttl_at < simba_mutex.transition_at",
		"the room test of the enqueue":       "LENGTH(simba_mutex.queue) < 3712",
		"the renewal test of a queued entry": "2592000000) DIV 2",
	} {
		if n := strings.Count(upd, expr); n != 1 {
			t.Errorf("the ON DUPLICATE KEY UPDATE of Acquire evaluates %s (%s) %d times, want 1", what, expr, n)
		}
	}
}
