package zkstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/zkstore"
)

// A Manager on a ZooKeeper session of its own. (Compiled, not run by go
// test: it needs a ZooKeeper on 127.0.0.1:2181.)
func Example() {
	ctx := context.Background()
	connecting, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sess, err := zkstore.Connect(connecting, []string{"127.0.0.1:2181"}, 10*time.Second,
		zkstore.WithConnOptions(zk.WithLogInfo(false)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close() // the application's: the Store never closes it

	store, err := zkstore.New(sess, zkstore.WithRoot("/myapp/locks"))
	if err != nil {
		fmt.Println(err)
		return
	}
	// ttl + transition = the session timeout the server granted.
	m, err := lease.NewManager(store, store.LeaseOptions()...)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close(ctx)

	l, err := m.Acquire(ctx, "orders/42")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Release(ctx)
	// l.Context() ends the moment the lease is lost; l.Token() is the
	// owner node's czxid, for the resource to reject stale writers.
	fmt.Println("held with token", l.Token())
}
