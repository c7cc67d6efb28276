package loadgen

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Template is request text (JSON arguments, a resource URI) with placeholders that
// are filled in for every request:
//
//	{{seq}}         a number unique to the request within the run (0, 1, 2, ...)
//	{{session}}     the index of the session sending it
//	{{rand A B}}    a uniformly random integer in [A, B]
//	{{randstr N}}   N random characters from [a-z0-9]
//	{{uuid}}        a random version 4 UUID
//	{{now}}         the Unix time in milliseconds
//
// Placeholders produce text without quotes, so "{{seq}}" inside a JSON string yields a
// string and {{seq}} outside one yields a number. Parsing happens once; filling in a
// template appends to a buffer without allocating.
type Template struct {
	src   string
	parts []tplPart
}

type tplKind uint8

const (
	tplLiteral tplKind = iota
	tplSeq
	tplSession
	tplRand
	tplRandStr
	tplUUID
	tplNow
)

type tplPart struct {
	kind tplKind
	lit  string
	a, b int64
}

// TemplateEnv is the per-request input of a template.
type TemplateEnv struct {
	Seq     uint64
	Session int
	Rand    *rand.Rand
}

// ParseTemplate parses src.
func ParseTemplate(src string) (*Template, error) {
	t := &Template{src: src}
	rest := src
	for rest != "" {
		i := strings.Index(rest, "{{")
		if i < 0 {
			t.parts = append(t.parts, tplPart{lit: rest})
			break
		}
		if i > 0 {
			t.parts = append(t.parts, tplPart{lit: rest[:i]})
		}
		j := strings.Index(rest[i:], "}}")
		if j < 0 {
			return nil, fmt.Errorf("template %q: unclosed {{", src)
		}
		p, err := parsePlaceholder(strings.Fields(rest[i+2 : i+j]))
		if err != nil {
			return nil, fmt.Errorf("template %q: %w", src, err)
		}
		t.parts = append(t.parts, p)
		rest = rest[i+j+2:]
	}
	return t, nil
}

func parsePlaceholder(f []string) (tplPart, error) {
	if len(f) == 0 {
		return tplPart{}, fmt.Errorf("empty placeholder")
	}
	ints := func(n int) ([]int64, error) {
		if len(f) != n+1 {
			return nil, fmt.Errorf("{{%s}} takes %d arguments", f[0], n)
		}
		out := make([]int64, n)
		for i := range out {
			v, err := strconv.ParseInt(f[i+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("{{%s}}: bad integer %q", f[0], f[i+1])
			}
			out[i] = v
		}
		return out, nil
	}
	switch f[0] {
	case "seq", "session", "uuid", "now":
		if len(f) != 1 {
			return tplPart{}, fmt.Errorf("{{%s}} takes no arguments", f[0])
		}
		return tplPart{kind: map[string]tplKind{"seq": tplSeq, "session": tplSession, "uuid": tplUUID, "now": tplNow}[f[0]]}, nil
	case "rand":
		v, err := ints(2)
		if err != nil {
			return tplPart{}, err
		}
		if v[1] < v[0] {
			return tplPart{}, fmt.Errorf("{{rand %d %d}}: empty range", v[0], v[1])
		}
		return tplPart{kind: tplRand, a: v[0], b: v[1]}, nil
	case "randstr":
		v, err := ints(1)
		if err != nil {
			return tplPart{}, err
		}
		if v[0] < 1 || v[0] > 1<<20 {
			return tplPart{}, fmt.Errorf("{{randstr %d}}: length must be 1..1048576", v[0])
		}
		return tplPart{kind: tplRandStr, a: v[0]}, nil
	}
	return tplPart{}, fmt.Errorf("unknown placeholder {{%s}}", strings.Join(f, " "))
}

// Static reports whether the template has no placeholders.
func (t *Template) Static() bool {
	for _, p := range t.parts {
		if p.kind != tplLiteral {
			return false
		}
	}
	return true
}

// String returns the source text.
func (t *Template) String() string { return t.src }

const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"

// Append fills in the template and appends the result to dst.
func (t *Template) Append(dst []byte, env *TemplateEnv) []byte {
	for _, p := range t.parts {
		switch p.kind {
		case tplLiteral:
			dst = append(dst, p.lit...)
		case tplSeq:
			dst = strconv.AppendUint(dst, env.Seq, 10)
		case tplSession:
			dst = strconv.AppendInt(dst, int64(env.Session), 10)
		case tplRand:
			dst = strconv.AppendInt(dst, randIn(env.Rand, p.a, p.b), 10)
		case tplRandStr:
			for range p.a {
				dst = append(dst, alnum[env.Rand.IntN(len(alnum))])
			}
		case tplUUID:
			dst = appendUUID(dst, env.Rand)
		case tplNow:
			dst = strconv.AppendInt(dst, time.Now().UnixMilli(), 10)
		}
	}
	return dst
}

// randIn returns a uniformly random integer in [a, b] (a <= b). The width is taken as
// unsigned: b-a+1 overflows int64 for ranges wider than half of it ({{rand 0 MAX}}).
func randIn(r *rand.Rand, a, b int64) int64 {
	span := uint64(b) - uint64(a)
	if span == math.MaxUint64 {
		return int64(r.Uint64())
	}
	return a + int64(r.Uint64N(span+1))
}

func appendUUID(dst []byte, r *rand.Rand) []byte {
	var b [16]byte
	hi, lo := r.Uint64(), r.Uint64()
	for i := range 8 {
		b[i], b[8+i] = byte(hi>>(8*i)), byte(lo>>(8*i))
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hexDigits[c>>4], hexDigits[c&0xf])
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// checkJSON fills in t once and checks that the result is valid JSON, so that a bad
// argument template fails before the run rather than as a thousand server errors.
func checkJSON(t *Template, what string) error {
	env := TemplateEnv{Rand: rand.New(rand.NewPCG(1, 2))}
	out := t.Append(nil, &env)
	if !json.Valid(out) {
		return fmt.Errorf("%s is not valid JSON once filled in: %s", what, out)
	}
	return nil
}
