//go:build !linux

package client

import "syscall"

// bindAtConnect binds as the system does: the option that defers the choice of port
// to connect is Linux's.
func bindAtConnect(_, _ string, _ syscall.RawConn) error { return nil }
