package redact

import (
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// MinValueLen is the shortest value, in bytes, that a Scrubber registers.
// Shorter values would match ordinary text far too often.
const MinValueLen = 4

// Scrubber replaces registered secret values, and their encodings, with
// Redacted wherever they appear in text. It is safe for concurrent use; a
// Scrubber must be made with NewScrubber (the zero value panics on
// Register). Matching methods on a nil *Scrubber match nothing.
//
// For each value it matches the raw bytes, their percent-encoded forms
// (url.QueryEscape and url.PathEscape, upper- and lower-case hex), base64 in
// the standard and URL alphabets (padded and unpadded), every byte
// percent-encoded, hex (lower and upper case), and the body of a JSON
// string as Go, PHP and Python encoders write it (see encodedForms). Inside a larger base64 blob (such as the Basic credentials
// of "user:"+value) it matches the part of the encoding that depends only on
// the value, for each of the three byte alignments; the one or two
// characters at each edge of that part remain. Values too short for that
// part to reach 8 characters (under 6 bytes) are only found aligned.
// ContainsDecoded finds more forms, which cannot be replaced in place
// (escapes undone, separated hex, invisible characters inserted), and
// ContainsInHost those of a host name (any case, base32, a value split
// over labels); MaxSpan, MaxDecodedSpan and the constants beside them
// bound every form. Stream and Detector do what ScrubBytes and
// ContainsDecoded do on a body that arrives in pieces. Other
// encodings (gzip, a value split other ways, reversed...) are not
// detected.
//
// The Scrubber keeps copies of registered values, as Go strings, until
// they are unregistered; those copies cannot be zeroed.
type Scrubber struct {
	mu   sync.Mutex
	regs map[uint64][]string // registration → its patterns
	next uint64
	gen  uint64                  // rebuilds so far; matcher.gen
	m    atomic.Pointer[matcher] // nil when nothing is registered
	// host is the matcher of the forms a host name carries (host.go),
	// built on first use for the generation it carries.
	host atomic.Pointer[matcher]
}

// NewScrubber returns an empty Scrubber.
func NewScrubber() *Scrubber {
	return &Scrubber{regs: map[uint64][]string{}}
}

// Register adds value and its encoded forms to the patterns s removes, and
// returns a function that removes them again (idempotent). The value is
// copied. A value shorter than MinValueLen bytes, or one with a form that
// occurs inside Redacted itself (it could never be removed), is not
// registered: Register then returns a no-op.
func (s *Scrubber) Register(value []byte) (unregister func()) {
	if len(value) < MinValueLen {
		return func() {}
	}
	pats := encodedForms(value)
	for _, p := range pats {
		if strings.Contains(Redacted, p) {
			return func() {}
		}
	}
	s.mu.Lock()
	id := s.next
	s.next++
	s.regs[id] = pats
	s.rebuild()
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.regs, id)
			s.rebuild()
			s.mu.Unlock()
		})
	}
}

// rebuild publishes a matcher for the current registrations; s.mu is held.
func (s *Scrubber) rebuild() {
	if len(s.regs) == 0 {
		s.m.Store(nil)
		return
	}
	s.gen++
	var all []string
	for _, pats := range s.regs {
		all = append(all, pats...)
	}
	s.m.Store(newMatcher(all, s.gen))
}

// newMatcher builds a matcher for patterns (each at least 2 bytes long;
// repeats are dropped), stamped with generation gen.
func newMatcher(patterns []string, gen uint64) *matcher {
	m := &matcher{minLen: -1, gen: gen}
	seen := map[string]bool{}
	var all []string
	for _, p := range patterns {
		if seen[p] {
			continue
		}
		seen[p] = true
		all = append(all, p)
		m.byFirst[p[0]] = append(m.byFirst[p[0]], p)
		pair := uint16(p[0])<<8 | uint16(p[1])
		m.pairs[pair/64] |= 1 << (pair % 64)
		if m.minLen < 0 || len(p) < m.minLen {
			m.minLen = len(p)
		}
	}
	for _, ps := range m.byFirst {
		sort.Slice(ps, func(i, j int) bool { return len(ps[i]) > len(ps[j]) })
	}
	m.buildShift(all)
	return m
}

// buildShift fills m.shift from patterns (m.minLen is set): for each
// 2-byte block, how far a window of minLen bytes that ends in that block
// can move right without passing the start of a match. A pattern p that
// starts k bytes after a window's start (0 ≤ k ≤ minLen-2) puts its bytes
// p[q-1], p[q] (q = minLen-1-k) at the window's end, so the block's shift
// is the least minLen-1-q over every such occurrence; a block that occurs
// in no pattern's first minLen bytes shifts by minLen-1 (capped at 255).
// Smaller shifts are always safe; TestFindMatchesNaive and FuzzFind
// compare find with a naive search.
func (m *matcher) buildShift(patterns []string) {
	def := uint8(min(m.minLen-1, 255))
	for i := range m.shift {
		m.shift[i] = def
	}
	for _, p := range patterns {
		for q := 1; q < m.minLen; q++ {
			block := uint16(p[q-1])<<8 | uint16(p[q])
			if sh := m.minLen - 1 - q; sh < int(m.shift[block]) {
				m.shift[block] = uint8(sh)
			}
		}
	}
}

// load returns the current matcher, or nil.
func (s *Scrubber) load() *matcher {
	if s == nil {
		return nil
	}
	return s.m.Load()
}

// Scrub returns str with every registered pattern replaced by Redacted,
// leftmost first and longest first at one position. If a replacement
// creates a new occurrence (a pattern overlapping Redacted), the new
// match and the marker merge into one Redacted, and Scrub goes on until
// nothing matches (see replacer). When nothing matches it returns str
// without allocating. The result never contains a registered pattern, so
// Scrub is idempotent; a Stream gives the same result piece by piece.
func (s *Scrubber) Scrub(str string) string {
	m := s.load()
	if m == nil {
		return str
	}
	if i, _ := m.find(str, 0); i < 0 {
		return str
	}
	return replaceAll(m, str)
}

// ScrubBytes is Scrub for bytes. It returns b itself when nothing matches,
// otherwise a new slice; b is never modified.
func (s *Scrubber) ScrubBytes(b []byte) []byte {
	if s.load() == nil || !s.Contains(b) {
		return b
	}
	return []byte(s.Scrub(string(b)))
}

// Contains reports whether b contains any registered pattern. It does not
// allocate.
func (s *Scrubber) Contains(b []byte) bool {
	return s.containsString(unsafe.String(unsafe.SliceData(b), len(b)))
}

// containsString reports whether str contains any registered pattern.
func (s *Scrubber) containsString(str string) bool {
	m := s.load()
	if m == nil {
		return false
	}
	i, _ := m.find(str, 0)
	return i >= 0
}

// matcher is an immutable set of patterns (each at least 2 bytes long)
// indexed by first byte, with a bitset of their first two bytes to check
// a candidate position quickly, and a shift table over 2-byte blocks
// (Wu–Manber) to skip positions where no pattern can start.
type matcher struct {
	minLen  int
	gen     uint64 // the Scrubber's rebuild count when this was built
	pairs   [65536 / 64]uint64
	shift   [65536]uint8  // see buildShift
	byFirst [256][]string // longest first
	auto    automata      // for the streaming scanners, built on first use
}

// find returns the leftmost match at or after from, longest at that
// position, as [i, j); i is -1 when there is none. It visits candidate
// starts left to right, skipping only starts the shift table rules out,
// so the first match it finds is the leftmost.
func (m *matcher) find(s string, from int) (i, j int) {
	n := m.minLen
	for i = from; i+n <= len(s); {
		e := i + n - 1
		if sh := m.shift[uint16(s[e-1])<<8|uint16(s[e])]; sh != 0 {
			i += int(sh)
			continue
		}
		if pair := uint16(s[i])<<8 | uint16(s[i+1]); m.pairs[pair/64]&(1<<(pair%64)) != 0 {
			for _, p := range m.byFirst[s[i]] {
				if strings.HasPrefix(s[i:], p) {
					return i, i + len(p)
				}
			}
		}
		i++
	}
	return -1, -1
}
