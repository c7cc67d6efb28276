package modern

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"time"

	"github.com/mcprouter/mcprouter/codec"
)

// requestState, as the router hands it to a 2026-07-28 client when it translates a
// 2025 backend's server-to-client request into an InputRequiredResult: the client must
// echo it on the retry, and the retry may land on another router instance, so the state
// carries what the router needs (Payload: which instance and which waiting backend
// request) and protects it. The specification (mrtr, server requirements) asks for
// integrity protection and, against replay, the principal, a short expiry and the
// identity of the original request inside the protected payload; Open checks each and
// says which failed.

// Errors of Open, matched with errors.Is. Each says a different thing to the client (and
// to the logs): a forged or corrupted state, a stale one, someone else's, one from
// another request.
var (
	ErrStateTampered       = errors.New("requestState failed verification (tampered, corrupted or not issued by this server)")
	ErrStateExpired        = errors.New("requestState has expired: send the original request again, without requestState")
	ErrStateOtherPrincipal = errors.New("requestState was issued to another principal")
	ErrStateOtherRequest   = errors.New("requestState belongs to another request (method, name or arguments differ)")
)

// RejectState is the answer to a retry whose requestState Open refused: invalid params
// (the conformance suite and the specification ask for a JSON-RPC error), HTTP 400.
func RejectState(err error) Reject {
	return invalidParams(err.Error())
}

// stateVersion is the first byte of the sealed payload, so that the format can change
// without old states being misread.
const stateVersion = 1

// Sizes of the sealed layout: nonce | AEAD(version | expiry ms | request digest |
// principal digest | payload).
const (
	nonceSize  = 12
	headerSize = 1 + 8 + sha256.Size + sha256.Size
)

// strictState decodes a state refusing non-zero trailing bits, so that no two strings
// open to the same state (a changed last character is tampering, not a synonym).
var strictState = base64.RawURLEncoding.Strict()

// Sealer seals and opens requestState values with AES-256-GCM under the router's key.
// All router instances of a cluster share the key, so any of them can open a state
// another one issued. A Sealer is safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD
	// Now is the clock (tests set it); nil means time.Now.
	Now func() time.Time
}

// NewSealer returns a Sealer keyed by key, which must be 32 bytes of secret randomness
// (the router's configuration, or a random key per process for a single instance).
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != 32 {
		return nil, errors.New("requestState key must be 32 bytes")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

func (s *Sealer) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Digest identifies the original request a state belongs to: its method, the name or
// URI it names, and its arguments (params.arguments, insignificant whitespace removed),
// the parts a client repeats on the retry; _meta, inputResponses and requestState differ
// between the two and are left out.
type Digest [sha256.Size]byte

// RequestDigest computes the Digest of a request from its scan.
func RequestDigest(m *codec.Message) Digest {
	h := sha256.New()
	h.Write(m.Method)
	h.Write([]byte{0})
	h.Write(m.Name)
	h.Write([]byte{0})
	h.Write(m.URI)
	h.Write([]byte{0})
	if args := codec.Member(m.Params, "arguments"); args != nil {
		writeCompact(h, args)
	}
	var d Digest
	h.Sum(d[:0])
	return d
}

// writeCompact writes JSON without the whitespace outside strings.
func writeCompact(h interface{ Write([]byte) (int, error) }, v []byte) {
	start := 0
	inStr := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case !inStr && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			h.Write(v[start:i])
			start = i + 1
		}
	}
	h.Write(v[start:])
}

// Seal returns the requestState string carrying payload for the request with digest
// req, issued to principal ("" when the client is anonymous) and valid for ttl. The
// string is base64url without padding, so it needs no escaping in JSON.
func (s *Sealer) Seal(payload []byte, principal string, req Digest, ttl time.Duration) string {
	plain := make([]byte, headerSize, headerSize+len(payload))
	plain[0] = stateVersion
	binary.BigEndian.PutUint64(plain[1:9], uint64(s.now().Add(ttl).UnixMilli()))
	copy(plain[9:9+sha256.Size], req[:])
	pd := sha256.Sum256([]byte(principal))
	copy(plain[9+sha256.Size:], pd[:])
	plain = append(plain, payload...)

	sealed := make([]byte, nonceSize, nonceSize+len(plain)+s.aead.Overhead())
	if _, err := rand.Read(sealed); err != nil {
		panic("crypto/rand failed: " + err.Error()) // the stdlib documents it never does
	}
	sealed = s.aead.Seal(sealed, sealed[:nonceSize], plain, nil)
	return base64.RawURLEncoding.EncodeToString(sealed)
}

// Open verifies state and returns its payload. The checks run in the order that gives
// the most useful answer: integrity first (nothing else in a forged state means
// anything), then the request, the principal and the expiry.
func (s *Sealer) Open(state []byte, principal string, req Digest) ([]byte, error) {
	raw := make([]byte, base64.RawURLEncoding.DecodedLen(len(state)))
	n, err := strictState.Decode(raw, state)
	if err != nil || n < nonceSize+s.aead.Overhead()+headerSize {
		return nil, ErrStateTampered
	}
	raw = raw[:n]
	plain, err := s.aead.Open(raw[nonceSize:nonceSize], raw[:nonceSize], raw[nonceSize:], nil)
	if err != nil || len(plain) < headerSize || plain[0] != stateVersion {
		return nil, ErrStateTampered
	}
	if Digest(plain[9:9+sha256.Size]) != req {
		return nil, ErrStateOtherRequest
	}
	if pd := sha256.Sum256([]byte(principal)); [sha256.Size]byte(plain[9+sha256.Size:headerSize]) != pd {
		return nil, ErrStateOtherPrincipal
	}
	if expiry := int64(binary.BigEndian.Uint64(plain[1:9])); s.now().UnixMilli() >= expiry {
		return nil, ErrStateExpired
	}
	return plain[headerSize:], nil
}
