package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Credential is one header of the router's own credentials for a backend: a bearer
// token, an API key. The client's token is never one: a backend is given what was
// configured for it, or a token obtained for it (client credentials, token exchange).
//
// The HTTP clients ask for the value on every request they make (POSTs, the GET stream
// and each of its reconnects, resumptions, DELETE, the legacy event stream and its
// reconnects), so that a rotated file or a refreshed token is used at once, without
// reconnecting. Value and Refused are called concurrently from any goroutine; Value
// runs on the request's path, so a source that must fetch does so within ctx and keeps
// what it fetched.
type Credential interface {
	// Header is the name of the header the credential travels in (Authorization for
	// a bearer token). It never changes.
	Header() string
	// Value returns the header's value for one request.
	Value(ctx context.Context) (string, error)
	// Refused tells the source that the backend answered 401 to a request that
	// carried value. A source that keeps a token drops it so that the next Value
	// fetches another; it reports whether the next Value may differ from value, that
	// is whether sending the request again may help.
	Refused(value string) bool
}

// AuthorizationHeader is the header of bearer tokens.
const AuthorizationHeader = "Authorization"

// StaticHeader is a credential that does not change: an API key, or a token read once
// from the router's environment.
func StaticHeader(name, value string) (Credential, error) {
	if err := checkHeader(name, value); err != nil {
		return nil, err
	}
	return staticCred{name, value}, nil
}

// Bearer is a static bearer token.
func Bearer(token string) (Credential, error) {
	if err := checkHeaderValue(token); err != nil {
		return nil, err
	}
	return StaticHeader(AuthorizationHeader, "Bearer "+token)
}

type staticCred struct{ name, value string }

func (s staticCred) Header() string                        { return s.name }
func (s staticCred) Value(context.Context) (string, error) { return s.value, nil }
func (s staticCred) Refused(string) bool                   { return false }

// String and GoString name the credential, never its value, wherever it is printed.
func (s staticCred) String() string   { return "static " + s.name }
func (s staticCred) GoString() string { return s.String() }

// checkHeader refuses a header a credential may not set, and a value that would break
// the request (a line break, any control character) or is empty.
func checkHeader(name, value string) error {
	if name == "" || !isToken(name) {
		return fmt.Errorf("upstream: credential header name %q is not an HTTP token", name)
	}
	if reservedHeaders[lowerASCII(name)] {
		return errors.New("upstream: header " + name + " is set by the client and cannot carry credentials")
	}
	return checkHeaderValue(value)
}

// checkHeaderValue refuses an empty value and one with control characters (a stray
// line break in a secret file would otherwise split the request's headers). The error
// never quotes the value: it is a secret.
func checkHeaderValue(value string) error {
	if value == "" {
		return errors.New("upstream: credential is empty")
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < ' ' && c != '\t' || c == 0x7f {
			return fmt.Errorf("upstream: credential has a control character at byte %d", i)
		}
	}
	return nil
}

// isToken reports whether s is an RFC 9110 token (a valid header name).
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '!' || c == '#' || c == '$' || c == '%' || c == '&' || c == '\'' || c == '*' ||
			c == '+' || c == '-' || c == '.' || c == '^' || c == '_' || c == '`' || c == '|' || c == '~':
		default:
			return false
		}
	}
	return true
}

// FileHeader is a credential read from a file (a mounted secret), prefix and the file's
// content with surrounding white space trimmed. The file is checked for a change at
// most once per fileCheckEvery, and at once when the backend refuses the value, so a
// rotated secret is picked up without a restart. While the file cannot be read (a
// rotation replacing it) the last value stays in use.
func FileHeader(name, path, prefix string) (Credential, error) {
	if err := checkHeader(name, prefix+"x"); err != nil {
		return nil, err
	}
	f := &fileCred{name: name, path: path, prefix: prefix}
	st, err := f.read()
	if err != nil {
		return nil, err
	}
	f.state.Store(st)
	return f, nil
}

// BearerFile is a bearer token read from a file, re-read when it changes.
func BearerFile(path string) (Credential, error) {
	return FileHeader(AuthorizationHeader, path, "Bearer ")
}

// fileCheckEvery is how often a credential file is checked for a change (one stat).
var fileCheckEvery = time.Second

// maxSecretFile bounds a credential file: a token is a few kilobytes at most.
const maxSecretFile = 64 << 10

type fileCred struct {
	name, path, prefix string
	state              atomic.Pointer[fileState]
	// mu is held by the one goroutine checking the file; the others use the last value
	// meanwhile rather than wait for the file system.
	mu sync.Mutex
}

// fileState is what was read, from which version of the file, and when it was checked.
type fileState struct {
	value   string
	info    os.FileInfo
	checked time.Time
}

func (f *fileCred) Header() string   { return f.name }
func (f *fileCred) String() string   { return "file " + f.name }
func (f *fileCred) GoString() string { return f.String() }

// Value implements Credential.
func (f *fileCred) Value(context.Context) (string, error) {
	st := f.state.Load()
	if time.Since(st.checked) >= fileCheckEvery && f.mu.TryLock() {
		st = f.check(false)
		f.mu.Unlock()
	}
	return st.value, nil
}

// Refused implements Credential: the file is read again now; a new content is worth a
// retry.
func (f *fileCred) Refused(value string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state.Load().value != value {
		return true // replaced meanwhile
	}
	return f.check(true).value != value
}

// check stats the file and reads it again if it changed (always if force), under f.mu.
func (f *fileCred) check(force bool) *fileState {
	old := f.state.Load()
	cur := *old
	cur.checked = time.Now()
	if fi, err := os.Stat(f.path); err == nil && (force || !sameVersion(old.info, fi)) {
		if st, err := f.read(); err == nil {
			cur = *st
		}
	}
	f.state.Store(&cur)
	return &cur
}

// sameVersion reports whether a and b are the same file, unchanged.
func sameVersion(a, b os.FileInfo) bool {
	return a != nil && os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}

// read reads the file's current content.
func (f *fileCred) read() (*fileState, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, fmt.Errorf("upstream: credential file: %w", err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("upstream: credential file: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(fh, maxSecretFile+1))
	if err != nil {
		return nil, fmt.Errorf("upstream: credential file %s: %w", f.path, err)
	}
	if len(b) > maxSecretFile {
		return nil, fmt.Errorf("upstream: credential file %s is larger than %d bytes", f.path, maxSecretFile)
	}
	v := strings.Trim(string(b), " \t\r\n")
	if err := checkHeaderValue(v); err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, f.path)
	}
	return &fileState{value: f.prefix + v, info: fi, checked: time.Now()}, nil
}

// setCredentials sets the credentials' headers on one request to the backend.
func (b *httpBase) setCredentials(ctx context.Context, h *fasthttp.RequestHeader) error {
	for _, c := range b.opts.Credentials {
		v, err := c.Value(ctx)
		if err != nil {
			return fmt.Errorf("upstream: %s: the router's credentials for the backend: %w", b.opts.Name, err)
		}
		h.Set(c.Header(), v)
	}
	return nil
}

// statusErr is the error of an unexpected status to req, named after the backend. On a
// 401 it tells each credential the backend refused the value req carried; the error
// records whether one of them has another value to try (StatusError.renewed).
func (b *httpBase) statusErr(req *fasthttp.Request, resp *fasthttp.Response, body io.Reader, method string) error {
	e := statusError(resp, body, method)
	e.Backend = b.opts.Name
	if e.Status == fasthttp.StatusUnauthorized {
		for _, c := range b.opts.Credentials {
			if c.Refused(string(req.Header.Peek(c.Header()))) {
				e.renewed = true
			}
		}
		b.log.Warn("backend refused the router's credentials", "status", e.Status, "method", method, "retry", e.renewed)
	} else if e.Status == fasthttp.StatusForbidden {
		b.log.Warn("backend refused the router's credentials", "status", e.Status, "method", method)
	}
	return e
}

// retryAuth reports whether err is a 401 after which a credential has a new value: the
// backend did not process the request, so sending it once more is safe.
func retryAuth(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.renewed
}

// validateCredentials checks the credentials' headers against the configured ones and
// the transport's own.
func (o *HTTPOptions) validateCredentials() error {
	seen := make(map[string]bool, len(o.Credentials))
	for k := range o.Headers {
		seen[lowerASCII(k)] = true
	}
	for _, c := range o.Credentials {
		if c == nil {
			return errors.New("upstream: nil Credential")
		}
		name := c.Header()
		if err := checkHeader(name, "x"); err != nil {
			return err
		}
		if seen[lowerASCII(name)] {
			return errors.New("upstream: header " + name + " is set twice (Headers, Credentials)")
		}
		seen[lowerASCII(name)] = true
	}
	return nil
}
