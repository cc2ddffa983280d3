//go:build !unix

package testserver

import (
	"errors"
	"syscall"
	"time"
)

// localSupported reports whether local server processes can be run here.
const localSupported = false

var errNoUnix = errors.New("testserver: local server processes need a Unix system")

func sysProcAttr(int, int) *syscall.SysProcAttr { return nil }
func exited(int) bool                           { return false }
func signalGroup(int, syscall.Signal) error     { return errNoUnix }
func processAlive(int) bool                     { return false }

// Placeholders: never sent, signalGroup fails first.
const (
	sigStop = syscall.Signal(19)
	sigCont = syscall.Signal(18)
)

func releaseStaleShm(string) {}

func reaperAttr() *syscall.SysProcAttr { return nil }

func descendants(int) []int           { return nil }
func waitExited([]int, time.Duration) {}
