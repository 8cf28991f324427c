package procexec

import (
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	p, err := NewPolicy([]Rule{
		{Executable: "/bin/sh", Args: []string{"-c", "true"}, Class: ClassReadOnly},
		{Executable: "/bin/sh", Args: []string{"-c", AnyArg}, Class: ClassMutating, Mutation: "shell.run"},
		{Executable: "/bin/sh", Args: []string{"-x", RestArgs}, Class: ClassForbidden},
		{Executable: "/bin/sh", Args: []string{"-c", AnyArg, RestArgs}, Class: ClassReadOnly},
	}, []string{"shell.run"})
	if err != nil {
		t.Fatal(err)
	}
	sh, err := Resolve("/bin/sh") // rules are keyed by the resolved path
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		exe  string
		args []string
		want Classification
	}{
		{"literal", sh, []string{"-c", "true"}, Classification{ClassReadOnly, ""}},
		{"first match wins", sh, []string{"-c", "false"}, Classification{ClassMutating, "shell.run"}},
		{"rest matches none", sh, []string{"-x"}, Classification{ClassForbidden, ""}},
		{"rest matches many", sh, []string{"-x", "a", "b"}, Classification{ClassForbidden, ""}},
		{"any then rest", sh, []string{"-c", "x", "y"}, Classification{ClassReadOnly, ""}},
		{"too few args", sh, []string{"-c"}, Classification{ClassUnknown, ""}},
		{"no args", sh, nil, Classification{ClassUnknown, ""}},
		{"other literal", sh, []string{"-e", "true"}, Classification{ClassUnknown, ""}},
		{"unresolved spelling", "/bin/sh", []string{"-c", "true"}, classifyUnresolved(sh)},
		{"other executable", "/bin/true", []string{"-c", "true"}, Classification{ClassUnknown, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			is.Equal(p.Classify(tt.exe, tt.args), tt.want)
		})
	}
	is.New(t).Equal((*Policy)(nil).Classify(sh, nil), Classification{Class: ClassUnknown})
}

// classifyUnresolved is what a lookup by the unresolved spelling gives: the
// same as the resolved one only when /bin/sh is not a symlink.
func classifyUnresolved(resolved string) Classification {
	if resolved == "/bin/sh" {
		return Classification{ClassReadOnly, ""}
	}
	return Classification{ClassUnknown, ""}
}

func TestNewPolicyRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		rule      Rule
		supported []string
		code      string
	}{
		{"relative executable", Rule{Executable: "sh", Class: ClassReadOnly}, nil, CodeInvalidSpec},
		{"unknown class", Rule{Executable: "/bin/sh", Class: ClassUnknown}, nil, CodeInvalidSpec},
		{"empty class", Rule{Executable: "/bin/sh"}, nil, CodeInvalidSpec},
		{"mutating without kind", Rule{Executable: "/bin/sh", Class: ClassMutating}, nil, CodeInvalidSpec},
		{"bad kind", Rule{Executable: "/bin/sh", Class: ClassMutating, Mutation: "Bad Kind"}, nil, CodeInvalidSpec},
		{"read-only with kind", Rule{Executable: "/bin/sh", Class: ClassReadOnly, Mutation: "x"}, nil, CodeInvalidSpec},
		{"rest not last", Rule{Executable: "/bin/sh", Args: []string{RestArgs, "x"}, Class: ClassReadOnly}, nil, CodeInvalidSpec},
		{"nul in literal", Rule{Executable: "/bin/sh", Args: []string{"a\x00b"}, Class: ClassReadOnly}, nil, CodeInvalidSpec},
		{"bad supported kind", Rule{Executable: "/bin/sh", Class: ClassReadOnly}, []string{"UPPER"}, CodeInvalidSpec},
		{"missing executable", Rule{Executable: "/nonexistent/hk-tool", Class: ClassReadOnly}, nil, CodeUnresolved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			p, err := NewPolicy([]Rule{tt.rule}, tt.supported)
			is.True(p == nil)
			is.Equal(wire.CodeOf(err), tt.code)
		})
	}
}
