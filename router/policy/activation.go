package policy

import (
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// activation is an Input seen by CEL (interpreter.Activation): it resolves the dotted
// variable names, making each value once per Input and the arguments only when a rule
// reads them. A pointer conversion from *Input, so that an evaluation allocates no
// activation of its own.
type activation Input

var _ interpreter.Activation = (*activation)(nil)

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	in := (*Input)(a)
	s := in.subj
	switch name {
	case varSub:
		return s.sub, true
	case varIss:
		return s.iss, true
	case varScopes:
		return s.scopes, true
	case varClaims:
		return s.claims, true
	case varMethod:
		return in.str(4, in.Method), true
	case varBackend:
		return in.str(5, in.Backend), true
	case varTool:
		return in.str(6, in.Tool), true
	case varPrompt:
		return in.str(7, in.Prompt), true
	case varURI:
		if in.unknown&useURI != 0 {
			return nil, false
		}
		return in.str(8, in.URI), true
	case varArgs:
		if in.unknown&useArgs != 0 {
			return nil, false
		}
		v, err := in.arguments()
		if err != nil {
			return types.WrapErr(err), true
		}
		return v, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }

// str returns the CEL string of variable i, made once per Input (the decided methods'
// names are made once for all).
func (in *Input) str(i int, s string) ref.Val {
	if v := in.vals[i]; v != nil {
		return v
	}
	v, ok := methodVals[s]
	if !ok {
		v = types.String(s)
	}
	in.vals[i], in.made = v, true
	return v
}

var methodVals = func() map[string]ref.Val {
	m := map[string]ref.Val{}
	for _, s := range [...]string{MethodToolsCall, MethodPromptsGet, MethodRead, MethodSubscribe, MethodComplete} {
		m[s] = types.String(s)
	}
	return m
}()

// Unknown-variable patterns of a catalog item's partial evaluation, made once.
var (
	unknownArgs    = []*interpreter.AttributePattern{cel.AttributePattern(varArgs)}
	unknownArgsURI = []*interpreter.AttributePattern{cel.AttributePattern(varArgs), cel.AttributePattern(varURI)}
)

// outcome is what one expression says of an input.
type outcome uint8

const (
	isFalse outcome = iota
	isTrue
	isUnknown // depends on what a catalog item does not know
	isError
)

// eval evaluates p for in (whose subj is set). For an input with unknown variables
// that p reads, the partial program says whether the result depends on them.
func (p *program) eval(in *Input) (outcome, error) {
	var (
		val ref.Val
		err error
	)
	if in.unknown&p.uses != 0 && p.partial != nil {
		pats := unknownArgs
		if in.unknown&useURI != 0 {
			pats = unknownArgsURI
		}
		var act interpreter.PartialActivation
		if act, err = cel.PartialVars((*activation)(in), pats...); err == nil {
			val, _, err = p.partial.Eval(act)
		}
	} else {
		val, _, err = p.prg.Eval((*activation)(in))
	}
	switch {
	case err != nil:
		return isError, err
	case types.IsUnknown(val):
		return isUnknown, nil
	}
	b, ok := val.(types.Bool)
	if !ok {
		return isError, errNotBool{val.Type().TypeName()}
	}
	if b {
		return isTrue, nil
	}
	return isFalse, nil
}

// errNotBool is the error of a dyn expression that did not yield a bool.
type errNotBool struct{ typ string }

func (e errNotBool) Error() string { return "the expression yielded a " + e.typ + ", not a bool" }
