package app

import (
	"bytes"
	"crypto/sha256"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// What asks for a reload: SIGHUP, and with reload.watch the configuration file's
// directory (editors and orchestrators replace a file by renaming another over it,
// which a watch on the file itself would miss: it would follow the old inode). Events
// come in bursts, so a reload waits for reload.debounce of quiet, and it happens only
// when the file's content changed since the last reload (a touch, or another file of
// the directory, changes nothing). Both run on one goroutine, ended by Shutdown.

// EnableReload makes the router read its configuration again with load on SIGHUP, and
// when the file at path changes if the configuration says reload.watch, from Start on.
// Call it once, after New and before Start: a fleet without a policy gets an empty one,
// so that a reload may bring rules (the fleet installs its policy machinery only before
// it starts).
func (a *App) EnableReload(path string, load Loader) {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	a.load, a.configPath = load, path
	if a.Policy == nil {
		a.Fleet.SetPolicy(nil)
	}
}

// startReload starts listening for SIGHUP and watching the file (Start, when
// EnableReload was called); the file's current content counts as loaded. A watch that
// cannot be set up is logged; SIGHUP still reloads.
func (a *App) startReload() {
	path := a.configPath
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	var w *fsnotify.Watcher
	if a.cfg.Reload.Watch {
		var err error
		if w, err = watchDir(path); err != nil {
			a.log.Warn("configuration reload: cannot watch the file; SIGHUP still reloads", "file", path, "err", err)
		}
	}
	a.reloadStop = make(chan struct{})
	a.reloadDone = make(chan struct{})
	go a.reloadLoop(hup, w, path)
	a.log.Info("configuration reload enabled", "file", path, "signal", "SIGHUP", "watch", w != nil)
}

// watchDir watches the directory of the file at path.
func watchDir(path string) (*fsnotify.Watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := w.Add(filepath.Dir(path)); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// reloadLoop runs the reloads that hup and w ask for until stopReload.
func (a *App) reloadLoop(hup chan os.Signal, w *fsnotify.Watcher, path string) {
	defer close(a.reloadDone)
	defer signal.Stop(hup)
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w != nil {
		defer w.Close()
		events, errs = w.Events, w.Errors
	}
	name := filepath.Clean(path)
	seen := fileSum(path)
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	for {
		select {
		case <-a.reloadStop:
			quiet.Stop()
			return
		case <-hup:
			a.Reload("SIGHUP")
			seen = fileSum(path)
		case ev := <-events:
			// Any change in the directory may be the file's: a rename over it, a
			// symlink swapped (mounted configuration), or the file written.
			if ev.Op == fsnotify.Chmod && filepath.Clean(ev.Name) != name {
				continue
			}
			quiet.Reset(a.cfg.Reload.Debounce)
		case err := <-errs:
			a.log.Warn("configuration watch", "file", path, "err", err)
		case <-quiet.C:
			sum := fileSum(path)
			if sum == nil || bytes.Equal(sum, seen) {
				continue // gone for now (a rename in progress) or unchanged
			}
			seen = sum
			a.Reload("file changed")
		}
	}
}

// stopReload ends the reload triggers and waits for a reload in progress.
func (a *App) stopReload() {
	if a.reloadStop == nil {
		return
	}
	close(a.reloadStop)
	<-a.reloadDone
}

// fileSum is the SHA-256 of the file's content, nil when it cannot be read.
func fileSum(path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	sum := sha256.Sum256(data)
	return sum[:]
}
