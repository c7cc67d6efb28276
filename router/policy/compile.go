package policy

import (
	"errors"
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
)

// uses is a set of the CEL variables an expression references (found in its checked
// AST), so that the work for a variable is done only when some rule reads it: the
// arguments are parsed only when a rule references mcp.arguments, a principal's claims
// count in its identity only when a rule references principal.claims.
type uses uint16

const (
	useSub uses = 1 << iota
	useIss
	useScopes
	useClaims
	useMethod
	useBackend
	useTool
	usePrompt
	useURI
	useArgs
)

// Names of the CEL variables, as rules write them.
const (
	varSub     = "principal.sub"
	varIss     = "principal.iss"
	varScopes  = "principal.scopes"
	varClaims  = "principal.claims"
	varMethod  = "mcp.method"
	varBackend = "mcp.backend"
	varTool    = "mcp.tool"
	varPrompt  = "mcp.prompt"
	varURI     = "mcp.uri"
	varArgs    = "mcp.arguments"
)

var variables = [...]struct {
	name string
	typ  *cel.Type
	bit  uses
}{
	{varSub, cel.StringType, useSub},
	{varIss, cel.StringType, useIss},
	{varScopes, cel.ListType(cel.StringType), useScopes},
	{varClaims, cel.MapType(cel.StringType, cel.DynType), useClaims},
	{varMethod, cel.StringType, useMethod},
	{varBackend, cel.StringType, useBackend},
	{varTool, cel.StringType, useTool},
	{varPrompt, cel.StringType, usePrompt},
	{varURI, cel.StringType, useURI},
	{varArgs, cel.MapType(cel.StringType, cel.DynType), useArgs},
}

// celEnv is the one CEL environment: the variables are declared with dotted names, so
// that a typo (mcp.tol) is an undeclared reference found at load, with its position.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	opts := make([]cel.EnvOption, 0, len(variables))
	for _, v := range variables {
		opts = append(opts, cel.Variable(v.name, v.typ))
	}
	return cel.NewEnv(opts...)
})

// program is one compiled expression.
type program struct {
	src  string
	prg  cel.Program // evaluates a request
	uses uses
	// partial evaluates a catalog item, with the variables an item does not know
	// (mcp.arguments; mcp.uri of a template) unknown; nil when the expression reads
	// neither, prg then serves items too.
	partial cel.Program
}

// rule is a compiled Rule.
type rule struct {
	program
	name  string
	index int // in the configuration
	deny  bool
}

// limitDef is a compiled Limit.
type limitDef struct {
	Limit
	index int
	match *program // nil: every request
}

// compiled is a compiled Config.
type compiled struct {
	cfg      Config // with defaults
	rules    []rule // the deny rules first, then the allow rules, each in configuration order
	hasAllow bool
	limits   []limitDef
	uses     uses // of every rule (not of the limits' matches)
}

// compileConfig compiles c (with defaults; raw is as configured, for error messages
// that name what the operator wrote). Every problem is reported.
func compileConfig(c Config, raw Config) (*compiled, error) {
	errs := validateShape(c, raw)
	env, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("policy: CEL environment: %w", err)
	}
	out := &compiled{cfg: c}
	var allows []rule
	for i, r := range c.Rules {
		key, src := "allow", r.Allow
		if r.Deny != "" {
			key, src = "deny", r.Deny
		}
		if (r.Allow == "") == (r.Deny == "") {
			continue // reported by validateShape
		}
		p, perrs := compileExpr(env, src, "rules", i, raw.Rules[i].Name, key)
		if perrs != nil {
			errs = append(errs, perrs...)
			continue
		}
		cr := rule{program: *p, name: r.Name, index: i, deny: r.Deny != ""}
		out.uses |= p.uses
		if cr.deny {
			out.rules = append(out.rules, cr)
		} else {
			allows = append(allows, cr)
		}
	}
	out.hasAllow = len(allows) > 0
	out.rules = append(out.rules, allows...)
	for i, l := range c.Limits {
		d := limitDef{Limit: l, index: i}
		if l.Match != "" {
			p, perrs := compileExpr(env, l.Match, "limits", i, raw.Limits[i].Name, "match")
			if perrs != nil {
				errs = append(errs, perrs...)
				continue
			}
			d.match = p
		}
		out.limits = append(out.limits, d)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// compileExpr parses and checks one expression (of type bool, or dyn, which is then
// checked at each evaluation) and plans its programs.
func compileExpr(env *cel.Env, src, section string, index int, name, key string) (*program, []error) {
	ast, iss := env.Compile(src)
	if iss.Err() != nil {
		var errs []error
		for _, e := range iss.Errors() {
			errs = append(errs, &ConfigError{Section: section, Index: index, Name: name, Key: key,
				Line: e.Location.Line(), Column: e.Location.Column() + 1, Msg: e.Message})
		}
		return nil, errs
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, []error{&ConfigError{Section: section, Index: index, Name: name, Key: key,
			Msg: fmt.Sprintf("must be a bool expression, this one is of type %s", t)}}
	}
	p := &program{src: src}
	for _, ref := range ast.NativeRep().ReferenceMap() {
		for _, v := range variables {
			if ref.Name == v.name {
				p.uses |= v.bit
			}
		}
	}
	var err error
	if p.prg, err = env.Program(ast, cel.EvalOptions(cel.OptOptimize)); err == nil && p.uses&(useArgs|useURI) != 0 {
		p.partial, err = env.Program(ast, cel.EvalOptions(cel.OptOptimize, cel.OptPartialEval))
	}
	if err != nil {
		return nil, []error{&ConfigError{Section: section, Index: index, Name: name, Key: key, Msg: err.Error()}}
	}
	return p, nil
}
