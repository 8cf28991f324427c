package secretdapi

import (
	"regexp"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// The grammar egressd and the redactor use: ValidPlaceholder must agree
// with it exactly.
var placeholderRE = regexp.MustCompile(`^hkp_[a-z2-7]{32}$`)

func TestValidPlaceholder(t *testing.T) {
	t.Parallel()
	good := "hkp_" + strings.Repeat("a2", 16)
	for _, tc := range []struct {
		name string
		s    string
		ok   bool
	}{
		{"well-formed", good, true},
		{"every letter and digit", "hkp_abcdefghijklmnopqrstuvwxyz234567", true},
		{"empty", "", false},
		{"prefix only", "hkp_", false},
		{"one short", good[:len(good)-1], false},
		{"one long", good + "a", false},
		{"upper case", "hkp_" + strings.Repeat("A2", 16), false},
		{"digit 1 is not base32", "hkp_" + strings.Repeat("a1", 16), false},
		{"digit 8", "hkp_" + strings.Repeat("a8", 16), false},
		{"other prefix", "hkx_" + strings.Repeat("a2", 16), false},
		{"upper-case prefix", "HKP_" + strings.Repeat("a2", 16), false},
		{"padding", "hkp_" + strings.Repeat("a2", 15) + "a=", false},
		{"newline", "hkp_" + strings.Repeat("a2", 15) + "a\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			is.Equal(ValidPlaceholder(tc.s), tc.ok)
			is.Equal(placeholderRE.MatchString(tc.s), tc.ok)
		})
	}
}

// FuzzValidPlaceholder: the hand-written check and the grammar's regexp
// never disagree.
func FuzzValidPlaceholder(f *testing.F) {
	for _, s := range []string{"hkp_" + strings.Repeat("a2", 16), "hkp_", "", "hkp_" + strings.Repeat("z7", 16) + "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidPlaceholder(s) != placeholderRE.MatchString(s) {
			t.Fatalf("ValidPlaceholder(%q) = %v, the grammar says %v", s, ValidPlaceholder(s), !ValidPlaceholder(s))
		}
	})
}
