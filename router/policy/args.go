package policy

import (
	"errors"
	"fmt"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/valyala/fastjson"
)

// The arguments become a CEL map only when a rule reads mcp.arguments: the params were
// already validated by the codec's scan, so a parse here (fastjson, reused parsers) only
// builds the values. A member repeated anywhere in what the rules read (two "arguments",
// two "path" inside them) is an error, hence a denial: a policy that read the first
// while the backend acts on the last would be bypassed.

var parsers fastjson.ParserPool

// errDuplicate is the error of a repeated member.
func errDuplicate(where, key string) error {
	return fmt.Errorf("%w: member %q appears twice in %s", ErrInput, key, where)
}

// arguments returns mcp.arguments: params.arguments of a tools/call or prompts/get (an
// empty map when absent), or for a completion params.context.arguments with the
// argument being completed (params.argument.name: value) over them.
func (in *Input) arguments() (ref.Val, error) {
	if in.args != nil || in.argsErr != nil {
		return in.args, in.argsErr
	}
	in.args, in.argsErr = in.parseArguments()
	in.made = true
	return in.args, in.argsErr
}

func (in *Input) parseArguments() (ref.Val, error) {
	empty := types.NewRefValMap(types.DefaultTypeAdapter, map[ref.Val]ref.Val{})
	if len(in.params) == 0 {
		return empty, nil
	}
	p := parsers.Get()
	defer parsers.Put(p)
	params, err := p.ParseBytes(replaceLoneSurrogates(in.params))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	if params.Type() != fastjson.TypeObject {
		return empty, nil
	}
	if !in.complete {
		args, err := member(params, "arguments", "params")
		if err != nil || args == nil {
			return empty, err
		}
		if args.Type() != fastjson.TypeObject {
			return nil, fmt.Errorf("%w: params.arguments is not an object", ErrInput)
		}
		return celValue(args)
	}
	m := map[ref.Val]ref.Val{}
	ctx, err := objectMember(params, "context", "params")
	if err != nil {
		return nil, err
	}
	if ca, err := objectMember(ctx, "arguments", "params.context"); err != nil {
		return nil, err
	} else if ca != nil {
		if m, err = celObject(ca); err != nil {
			return nil, err
		}
	}
	arg, err := objectMember(params, "argument", "params")
	if err != nil {
		return nil, err
	}
	var name, value *fastjson.Value
	if err := members(arg, "params.argument", field{"name", &name}, field{"value", &value}); err != nil {
		return nil, err
	}
	if name != nil && value != nil && name.Type() == fastjson.TypeString {
		v, err := celValue(value)
		if err != nil {
			return nil, err
		}
		m[types.String(name.GetStringBytes())] = v
	}
	return types.NewRefValMap(types.DefaultTypeAdapter, m), nil
}

// completionRef reads a completion's params.ref: ref/prompt names mcp.prompt,
// ref/resource names mcp.uri (a template, or a resource URI).
func (in *Input) completionRef() error {
	if len(in.params) == 0 {
		return nil
	}
	p := parsers.Get()
	defer parsers.Put(p)
	params, err := p.ParseBytes(in.params)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInput, err)
	}
	if params.Type() != fastjson.TypeObject {
		return nil
	}
	r, err := member(params, "ref", "params")
	if err != nil || r == nil {
		return err
	}
	if r.Type() != fastjson.TypeObject {
		return fmt.Errorf("%w: params.ref is not an object", ErrInput)
	}
	var typ, name, uri *fastjson.Value
	if err := members(r, "params.ref", field{"type", &typ}, field{"name", &name}, field{"uri", &uri}); err != nil {
		return err
	}
	str := func(v *fastjson.Value) string {
		if v != nil && v.Type() == fastjson.TypeString {
			return string(v.GetStringBytes())
		}
		return ""
	}
	switch str(typ) {
	case "ref/prompt":
		in.Prompt = str(name)
	case "ref/resource":
		in.URI = str(uri)
	}
	return nil
}

// field is a member to read and where to put it, for members.
type field struct {
	key string
	dst **fastjson.Value
}

// members reads the members fs of the object o (each nil if absent, or all when o is
// nil or not an object), an error if one is repeated.
func members(o *fastjson.Value, where string, fs ...field) error {
	for _, f := range fs {
		v, err := member(o, f.key, where)
		if err != nil {
			return err
		}
		*f.dst = v
	}
	return nil
}

// objectMember is member when the member is an object, and nil when it is of another
// type: the parts of a completion's params that are read only when they are objects.
func objectMember(o *fastjson.Value, key, where string) (*fastjson.Value, error) {
	v, err := member(o, key, where)
	if err != nil || v == nil || v.Type() != fastjson.TypeObject {
		return nil, err
	}
	return v, nil
}

// member returns the object o's member key, nil if absent (or o is nil or not an
// object), an error if repeated.
func member(o *fastjson.Value, key, where string) (*fastjson.Value, error) {
	if o == nil {
		return nil, nil
	}
	obj, err := o.Object()
	if err != nil {
		return nil, nil
	}
	var found *fastjson.Value
	var dup bool
	obj.Visit(func(k []byte, v *fastjson.Value) {
		if string(k) == key {
			dup = found != nil
			found = v
		}
	})
	if dup {
		return nil, errDuplicate(where, key)
	}
	return found, nil
}

// celMap is what celValue makes of an object, before it becomes a CEL map.
type celMap = map[ref.Val]ref.Val

// celValue converts a parsed JSON value to a CEL value: objects become maps (string
// keys), arrays lists, integers that fit int64 ints, other numbers doubles, and
// strings are copied out of the parser's memory. A repeated key is an error.
func celValue(v *fastjson.Value) (ref.Val, error) {
	switch v.Type() {
	case fastjson.TypeObject:
		m, err := celObject(v)
		if err != nil {
			return nil, err
		}
		return types.NewRefValMap(types.DefaultTypeAdapter, m), nil
	case fastjson.TypeArray:
		a := v.GetArray()
		elems := make([]ref.Val, len(a))
		for i, e := range a {
			var err error
			if elems[i], err = celValue(e); err != nil {
				return nil, err
			}
		}
		return types.NewRefValList(types.DefaultTypeAdapter, elems), nil
	case fastjson.TypeString:
		return types.String(v.GetStringBytes()), nil
	case fastjson.TypeNumber:
		if i, err := v.Int64(); err == nil {
			return types.Int(i), nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInput, err)
		}
		return types.Double(f), nil
	case fastjson.TypeTrue:
		return types.True, nil
	case fastjson.TypeFalse:
		return types.False, nil
	case fastjson.TypeNull:
		return types.NullValue, nil
	}
	return nil, errors.Join(ErrInput, fmt.Errorf("unexpected JSON value %s", v.Type()))
}

func celObject(v *fastjson.Value) (celMap, error) {
	o := v.GetObject()
	m := make(celMap, o.Len())
	var err error
	o.Visit(func(k []byte, e *fastjson.Value) {
		if err != nil {
			return
		}
		key := types.String(k)
		if _, dup := m[key]; dup {
			err = errDuplicate("params.arguments", string(k))
			return
		}
		m[key], err = celValue(e)
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}
