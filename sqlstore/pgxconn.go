package sqlstore

import (
	"context"
	"errors"
	"reflect"
)

// pgxConn reaches the methods of a *pgx.Conn (github.com/jackc/pgx/v5)
// that LISTEN needs through reflection, so that this package does not
// import pgx: a binary that uses MySQL or SQLite does not link it. The
// connection comes from pgx's database/sql driver (its driver.Conn has a
// Conn() *pgx.Conn method).
type pgxConn struct{ c reflect.Value }

// errPgxShape is returned when a method does not have the shape of pgx v5's.
var errPgxShape = errors.New("sqlstore: the pgx connection's methods are not pgx v5's")

var (
	ctxType = reflect.TypeFor[context.Context]()
	errType = reflect.TypeFor[error]()
)

// asPgx returns the *pgx.Conn under a database/sql driver connection of
// pgx's stdlib; ok is false for any other driver.
func asPgx(dc any) (pgxConn, bool) {
	m := reflect.ValueOf(dc).MethodByName("Conn")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
		return pgxConn{}, false
	}
	t := m.Type().Out(0)
	if t.Kind() != reflect.Pointer || t.Elem().Name() != "Conn" || t.Elem().PkgPath() != "github.com/jackc/pgx/v5" {
		return pgxConn{}, false
	}
	c := m.Call(nil)[0]
	return pgxConn{c}, !c.IsNil()
}

// call calls method name with ctx and args and returns its results, the
// last of which must be an error.
func (p pgxConn) call(name string, ctx context.Context, args ...any) ([]reflect.Value, error) {
	m := p.c.MethodByName(name)
	if !m.IsValid() {
		return nil, errPgxShape
	}
	if t := m.Type(); t.NumIn() < 1 || t.In(0) != ctxType || t.NumOut() == 0 || t.Out(t.NumOut()-1) != errType {
		return nil, errPgxShape
	}
	in := []reflect.Value{reflect.ValueOf(ctx)}
	for _, a := range args {
		in = append(in, reflect.ValueOf(a))
	}
	out := m.Call(in)
	if err, _ := out[len(out)-1].Interface().(error); err != nil {
		return out, err
	}
	return out, nil
}

// exec runs sql (Conn.Exec).
func (p pgxConn) exec(ctx context.Context, sql string) error {
	_, err := p.call("Exec", ctx, sql)
	return err
}

// waitForNotification returns the payload of the next notification
// (Conn.WaitForNotification).
func (p pgxConn) waitForNotification(ctx context.Context) (string, error) {
	out, err := p.call("WaitForNotification", ctx)
	if err != nil {
		return "", err
	}
	n := out[0]
	if n.Kind() != reflect.Pointer || n.IsNil() {
		return "", errPgxShape
	}
	f := n.Elem().FieldByName("Payload")
	if !f.IsValid() || f.Kind() != reflect.String {
		return "", errPgxShape
	}
	return f.String(), nil
}

// isClosed reports whether the connection is closed (Conn.IsClosed).
func (p pgxConn) isClosed() bool {
	m := p.c.MethodByName("IsClosed")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 || m.Type().Out(0).Kind() != reflect.Bool {
		return true
	}
	return m.Call(nil)[0].Bool()
}
