package testserver

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// dataTemplate is a data directory initialised once per test binary
// (initdb, mariadb-install-db: seconds each) and copied for every server
// (a tenth of a second).
type dataTemplate struct {
	once sync.Once
	dir  string // the initialised data directory
	err  error
}

var (
	postgresTemplate dataTemplate
	mariaDBTemplate  dataTemplate
)

// copyTo initialises the template on first use with init(dataDir) in a work
// directory of its own (removed at Shutdown), then copies it to dst, owned
// by uid/gid when uid >= 0.
func (t *dataTemplate) copyTo(kind, dst string, uid, gid int, init func(dataDir string) error) error {
	t.once.Do(func() {
		dir, err := newWorkDir(kind + "-template")
		if err != nil {
			t.err = err
			return
		}
		if err := handOver(dir, uid, gid); err != nil {
			t.err = err
			_ = os.RemoveAll(dir)
			return
		}
		if err := init(filepath.Join(dir, "data")); err != nil {
			t.err = err
			_ = os.RemoveAll(dir)
			return
		}
		t.dir = filepath.Join(dir, "data")
		onShutdown(func() error { return os.RemoveAll(dir) })
	})
	if t.err != nil {
		return t.err
	}
	if err := copyTree(t.dir, dst, uid, gid); err != nil {
		return fmt.Errorf("testserver: copy %s data directory: %w", kind, err)
	}
	return nil
}

// copyTree copies the regular files and directories under src to dst,
// keeping their permissions, owned by uid/gid when uid >= 0.
func copyTree(src, dst string, uid, gid int) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(target, info.Mode().Perm()); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			if err := copyFile(path, target, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: not a regular file or directory", path)
		}
		if uid >= 0 {
			return os.Lchown(target, uid, gid)
		}
		return nil
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
