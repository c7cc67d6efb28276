package router

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"

	"github.com/bytedance/sonic"
)

// A session record is written in a compact binary form: the NATS server that holds the
// records of a whole cluster keeps each one in memory, so every byte counts 100,000
// times. The JSON records of earlier builds (first byte '{') are still read, so that a
// session written by the previous build is carried on by this one during a rolling
// upgrade; a record in the binary form is not read by a build before it (its client
// initializes again on the 404), so a cluster is upgraded forward only.
//
// The binary form, after its first byte recordBinary, is a sequence of fields, each a
// uvarint length and that many bytes unless said otherwise:
//
//	version, principal ID,
//	client: one byte, clientInline (then capabilities and clientInfo, each as a field)
//	        or clientShared (then a blob key as a field: see blobStore),
//	subscription count (uvarint), then backend and URI of each.
const recordBinary = 0x02

const (
	clientInline = 0
	clientShared = 1
)

// errRecord is a record that cannot be decoded: to its reader the session does not
// exist.
var errRecord = errors.New("router: malformed session record")

// blobStore is a SessionStore that also keeps blobs that many records share: the
// capabilities and clientInfo of every client of one kind are the same bytes, so they
// are stored once, under a key derived from their content, and records refer to it.
type blobStore interface {
	// Share stores blob under key unless the store wrote it recently enough for it to
	// outlive a record written now, and reports whether a record written now may refer
	// to it. A store may decline (the blob is seen for the first time, its table of
	// blobs is full, the write failed): the record then carries the bytes itself.
	Share(key string, blob []byte) bool
	// LoadBlob reads a shared blob.
	LoadBlob(key string) ([]byte, bool)
}

// blobKey names a blob by its content: 128 bits of its SHA-256, URL-safe base64 (the
// characters a store key may hold). A blob read back is checked against its key.
func blobKey(blob []byte) string {
	sum := sha256.Sum256(blob)
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// appendClientBlob encodes capabilities and clientInfo as one blob.
func appendClientBlob(dst, caps, info []byte) []byte {
	dst = appendField(dst, caps)
	return appendField(dst, info)
}

func appendField(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendStringField(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// appendRecord encodes rec; sharedKey, when not empty, replaces its capabilities and
// clientInfo by a reference to the blob holding them.
func appendRecord(dst []byte, rec *record, sharedKey string) []byte {
	dst = append(dst, recordBinary)
	dst = appendStringField(dst, rec.Version)
	dst = appendStringField(dst, rec.Principal)
	if sharedKey != "" {
		dst = append(dst, clientShared)
		dst = appendStringField(dst, sharedKey)
	} else {
		dst = append(dst, clientInline)
		dst = appendClientBlob(dst, rec.Capabilities, rec.ClientInfo)
	}
	dst = binary.AppendUvarint(dst, uint64(len(rec.Subs)))
	for _, s := range rec.Subs {
		dst = appendStringField(dst, s[0])
		dst = appendStringField(dst, s[1])
	}
	return dst
}

// fieldReader takes the fields of a binary record in turn; the first malformed field
// sets err, and every field after it reads empty.
type fieldReader struct {
	b   []byte
	err error
}

func (r *fieldReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	n, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.err = errRecord
		return 0
	}
	r.b = r.b[k:]
	return n
}

func (r *fieldReader) field() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errRecord
		return nil
	}
	f := r.b[:n:n]
	r.b = r.b[n:]
	return f
}

func (r *fieldReader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.err = errRecord
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// nilIfEmpty keeps an absent capabilities or clientInfo absent (nil), as the JSON
// record had it.
func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// decodeRecord reads a record of either form. A binary record that refers to a shared
// blob loads it from blobs; a blob that is gone (or does not match its key) makes the
// record unreadable, as a record that is gone would be. The capabilities and clientInfo
// it returns may be views of b or of the blob: the session copies them (keepClient).
func decodeRecord(b []byte, blobs blobStore) (record, error) {
	var rec record
	if len(b) > 0 && b[0] == '{' {
		err := sonic.Unmarshal(b, &rec)
		if err == nil && rec.Version == "" {
			err = errRecord
		}
		return rec, err
	}
	if len(b) == 0 || b[0] != recordBinary {
		return rec, errRecord
	}
	r := fieldReader{b: b[1:]}
	rec.Version = string(r.field())
	rec.Principal = string(r.field())
	client := r.b
	switch r.byte() {
	case clientInline:
		client = r.b
		r.field()
		r.field()
	case clientShared:
		key := string(r.field())
		if r.err != nil {
			break
		}
		blob, ok := []byte(nil), false
		if blobs != nil {
			blob, ok = blobs.LoadBlob(key)
		}
		if !ok || blobKey(blob) != key {
			return rec, errRecord
		}
		client = blob
	default:
		r.err = errRecord
	}
	if r.err == nil {
		c := fieldReader{b: client}
		caps, info := c.field(), c.field()
		if c.err != nil {
			return rec, c.err
		}
		rec.Capabilities, rec.ClientInfo = nilIfEmpty(caps), nilIfEmpty(info)
	}
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) { // each takes two bytes at least
		r.err = errRecord
	}
	if r.err == nil && n > 0 {
		rec.Subs = make([][2]string, n)
		for i := range rec.Subs {
			rec.Subs[i] = [2]string{string(r.field()), string(r.field())}
		}
	}
	if r.err == nil && (len(r.b) != 0 || rec.Version == "") {
		r.err = errRecord
	}
	return rec, r.err
}
