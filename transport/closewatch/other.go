//go:build !linux

package closewatch

import (
	"errors"
	"syscall"
)

// ErrClosed is Add's error once the Watcher is closed.
var ErrClosed = errors.New("closewatch: watcher closed")

// Watcher is Linux's only; elsewhere New fails and the methods do nothing, so that
// callers compile everywhere and fall back to a reader per connection.
type Watcher struct{}

// New fails with errors.ErrUnsupported here.
func New() (*Watcher, error) { return nil, errors.ErrUnsupported }

// Add fails with errors.ErrUnsupported here.
func (w *Watcher) Add(syscall.RawConn, Closer) (Reg, error) { return Reg{}, errors.ErrUnsupported }

// Remove does nothing here.
func (w *Watcher) Remove(syscall.RawConn, Reg) {}

// Len returns 0 here.
func (w *Watcher) Len() int { return 0 }

// Close does nothing here.
func (w *Watcher) Close() error { return nil }
