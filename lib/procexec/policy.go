package procexec

import (
	"path/filepath"
	"slices"
	"strings"

	"hostkit.dev/lib/wire"
)

// Argument pattern wildcards for Rule.Args. They contain NUL, which no real
// argument may, so they never collide with a literal.
const (
	// AnyArg matches exactly one argument, whatever it is.
	AnyArg = "\x00any"
	// RestArgs, only as the last pattern element, matches zero or more
	// remaining arguments. Use it sparingly: it lets any flag through.
	RestArgs = "\x00rest"
)

// Rule classifies the commands whose resolved executable is Executable and
// whose arguments (argv[1:]) match Args element by element: a literal
// matches itself, AnyArg one argument, a final RestArgs the rest.
type Rule struct {
	// Executable is an absolute path; NewPolicy resolves it (so a symlink
	// such as /bin/sh names its target) and checks it like Resolve.
	Executable string
	Args       []string // argv[1:] pattern: literals, AnyArg, and RestArgs only last
	Class      Class    // what a matching command is
	// Mutation names the change for ClassMutating rules; empty otherwise.
	Mutation string
}

// Classification is what a Policy says about a command.
type Classification struct {
	Class    Class  // the matching rule's class; ClassUnknown when no rule matches
	Mutation string // the rule's mutation kind for ClassMutating; "" otherwise
}

// Policy maps (executable, argv pattern) to a classification; the caller
// writes the table. It is immutable and safe for concurrent use.
type Policy struct {
	rules     []Rule // Executable resolved
	mutations []string
}

// NewPolicy checks and resolves rules (first match wins) and records the
// mutation kinds this policy supports: a mutating rule whose kind is not in
// supported still classifies, but Run refuses it with
// CodeUnsupportedMutation. Errors: CodeInvalidSpec for a malformed rule,
// CodeUnresolved or CodeExecutableUnsafe for a rule's executable.
func NewPolicy(rules []Rule, supported []string) (*Policy, error) {
	p := &Policy{mutations: slices.Clone(supported)}
	for _, k := range supported {
		if !validKind(k) {
			return nil, wire.Errorf(CodeInvalidSpec, "mutation kind must match [a-z0-9._-]{1,64}")
		}
	}
	for i, r := range rules {
		if !filepath.IsAbs(r.Executable) {
			return nil, wire.Errorf(CodeInvalidSpec, "rule %d: executable is not absolute", i)
		}
		switch r.Class {
		case ClassReadOnly, ClassForbidden:
			if r.Mutation != "" {
				return nil, wire.Errorf(CodeInvalidSpec, "rule %d: only mutating rules name a mutation", i)
			}
		case ClassMutating:
			if !validKind(r.Mutation) {
				return nil, wire.Errorf(CodeInvalidSpec, "rule %d: mutating rules need a kind matching [a-z0-9._-]{1,64}", i)
			}
		default:
			return nil, wire.Errorf(CodeInvalidSpec, "rule %d: class must be read_only, mutating or forbidden", i)
		}
		for j, a := range r.Args {
			if a == RestArgs && j != len(r.Args)-1 {
				return nil, wire.Errorf(CodeInvalidSpec, "rule %d: RestArgs must be last", i)
			}
			if a != AnyArg && a != RestArgs && strings.IndexByte(a, 0) >= 0 {
				return nil, wire.Errorf(CodeInvalidSpec, "rule %d: an argument contains NUL", i)
			}
		}
		exe, err := Resolve(r.Executable)
		if err != nil {
			return nil, err
		}
		r.Executable = exe
		r.Args = slices.Clone(r.Args)
		p.rules = append(p.rules, r)
	}
	return p, nil
}

// Classify returns the classification of the first rule that matches the
// resolved executable path and args (argv[1:]); no match is ClassUnknown.
func (p *Policy) Classify(exe string, args []string) Classification {
	if p == nil {
		return Classification{Class: ClassUnknown}
	}
	for _, r := range p.rules {
		if r.Executable == exe && matchArgs(r.Args, args) {
			return Classification{Class: r.Class, Mutation: r.Mutation}
		}
	}
	return Classification{Class: ClassUnknown}
}

// Supports reports whether the policy supports mutation kind k.
func (p *Policy) Supports(k string) bool { return p != nil && slices.Contains(p.mutations, k) }

// matchArgs reports whether args match pattern.
func matchArgs(pattern, args []string) bool {
	for i, pat := range pattern {
		if pat == RestArgs {
			return true
		}
		if i >= len(args) || pat != AnyArg && pat != args[i] {
			return false
		}
	}
	return len(args) == len(pattern)
}
