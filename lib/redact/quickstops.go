package redact

import (
	"html"
	"unicode/utf8"
)

// The plainStop bytes quick reads without the long way: each is read
// only where every byte that decides it is in the piece and reaches
// every view as it is, so that every round decides it alike.

// reintroduce are the bytes a round may read together with the bytes
// after them as one escape or reference, and so hand the next round
// something else: the escape introducers and '&'. Every other byte
// leaves each round as it came (a '+' is a space only in the '+'
// view, which feeds no round; line breaks and invisible characters are
// dropped only in views that feed no round), so a round's unescaper
// and entity reader see it as the text has it: an escape or a name
// decided by such bytes is decided alike in every round.
var reintroduce = newByteSet(`\%=&`)

// decidesAlike reports whether every byte of d (bytes that decide an
// escape or a reference) reaches every round's unescaper and entity
// reader as it is.
func decidesAlike(d []byte) bool {
	for _, x := range d {
		if reintroduce[x] {
			return false
		}
	}
	return true
}

// inertStop returns how many bytes at the start of b (which begins with
// a plainStop byte) the quiet views read without any lane leaving its
// start state and with every transducer idle again after them, or 0 to
// leave them to the byte-by-byte path. It takes what is common in
// streamed text and in binary data, each only where every byte it reads
// is decided inside b:
//
//   - a complete escape (JSON, percent, quoted-printable) whose raw bytes
//     wake no lane in the text view and whose decoded bytes wake no
//     lane and no transducer in the decoded views; runs of "\n" and
//     "\r" escapes followed by a byte that ends them (endsBreaks)
//     likewise (their line breaks are then dropped or kept, and wake
//     nothing either way);
//   - an escape introducer ('\\', '%', '=', '&') that every round reads
//     as itself because what follows it is no escape, when it wakes no
//     lane: every view then reads the text as it is;
//   - '+' when neither it (the text and the decoded views) nor a space
//     (the '+' view) wakes a lane;
//   - a run of line breaks followed by a byte that ends it in every
//     view (endsBreaks), when line breaks wake no lane (the views
//     without line breaks drop or keep the run, and either way read
//     nothing that wakes a lane);
//   - the first byte of an invisible character's encoding that is
//     known not to begin one, when it wakes no lane.
func (v *views) inertStop(b []byte) int {
	c := b[0]
	switch c {
	case '+':
		if !v.q.wakes['+'] && !v.q.interest[' '] {
			return 1
		}
	case '\r', '\n':
		j := 1
		for j < len(b) && newline[b[j]] {
			j++
		}
		if j < len(b) && v.endsBreaks(b[j:]) && !v.q.wakes['\r'] && !v.q.wakes['\n'] {
			return j
		}
	case 0xE2, 0xEF, 0xC2:
		if visibleLead(b) && !v.q.wakes[c] {
			return 1
		}
	case '&':
		// A lone '&' (no name, no '#' after it) stands for itself in
		// every round.
		if v.literal(b) && !v.q.wakes['&'] {
			return 1
		}
	case '\\', '%', '=':
		return v.inertEscape(b)
	}
	return 0
}

// inertEscape is inertStop for an escape introducer at b[0].
func (v *views) inertEscape(b []byte) int {
	if b[0] == '\\' && len(b) >= 2 && v.q.shortInert[b[1]] {
		return 2
	}
	kind, r, n, seen := decideQuiet(b)
	if kind == escNeed {
		return 0
	}
	if !decidesAlike(b[1:seen]) {
		// What decides the escape may itself be an escape that a
		// round undoes: a later round may decide otherwise.
		return 0
	}
	if kind == escLiteral {
		if v.q.wakes[b[0]] {
			return 0
		}
		return 1
	}
	for _, x := range b[:n] {
		if v.q.wakes[x] {
			return 0 // the text view reads the escape as it is
		}
	}
	var enc [utf8.UTFMax]byte
	d := enc[:0]
	if kind == escRune {
		d = utf8.AppendRune(d, r)
	} else {
		d = append(d, byte(r))
	}
	if len(d) == 1 && newline[d[0]] {
		return v.inertBreaks(b)
	}
	for _, x := range d {
		if v.q.interest[x] {
			return 0
		}
	}
	return n
}

// inertBreaks is inertEscape for a run of "\n" and "\r" escapes: the
// decoded views read line breaks, which the views without line breaks
// hold until the run ends, so the run must end in b with a plain byte.
func (v *views) inertBreaks(b []byte) int {
	if v.q.wakes['\r'] || v.q.wakes['\n'] || v.q.wakes['\\'] || v.q.wakes['n'] || v.q.wakes['r'] {
		return 0
	}
	j := 0
	for j+1 < len(b) && b[j] == '\\' && (b[j+1] == 'n' || b[j+1] == 'r') {
		j += 2
	}
	if j == 0 || j >= len(b) || newline[b[j]] || !v.endsBreaks(b[j:]) {
		return 0
	}
	return j
}

// endsBreaks reports whether b[0], which follows a run of line breaks
// and is none, reaches every round as it is, so that it ends the run in
// every view: a byte that no round reads as the start of an escape or
// a reference, or an introducer that every round reads as itself
// (literal). What it is then read as ('+' a space in the '+' view, a
// lead byte the start of an invisible character) is quick's to decide
// next, with the run behind it.
func (v *views) endsBreaks(b []byte) bool {
	return !reintroduce[b[0]] || v.literal(b)
}

// decideQuiet is unescaper.decide at the start of b, not at the end of
// the text, for an escape that is not a quoted-printable soft line
// break (kind escNeed: undecided, or a soft line break, or a surrogate
// pair, which the caller leaves to the byte-by-byte path). seen is how
// many bytes of b the decision read.
func decideQuiet(b []byte) (kind int, r rune, n, seen int) {
	if len(b) < 2 {
		return escNeed, 0, 0, 0
	}
	switch b[0] {
	case '\\':
		switch b[1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			r, n := jsonEscape(b[:2])
			return escRune, r, n, 2
		case 'x', 'u':
			k := 4
			if b[1] == 'u' {
				k = 6
			}
			for i := 2; i < k; i++ {
				if i >= len(b) {
					return escNeed, 0, 0, 0
				}
				if _, ok := unhex(b[i]); !ok {
					return escLiteral, 0, 1, i + 1
				}
			}
			r, n := jsonEscape(b[:k])
			if n != k || r == utf8.RuneError {
				return escNeed, 0, 0, 0 // a surrogate
			}
			return escRune, r, n, k
		}
		return escLiteral, 0, 1, 2
	default: // %XX or =XX
		if b[0] == '=' && (b[1] == '\n' || b[1] == '\r') {
			return escNeed, 0, 0, 0 // a soft line break
		}
		h, ok := unhex(b[1])
		if !ok {
			return escLiteral, 0, 1, 2
		}
		if len(b) < 3 {
			return escNeed, 0, 0, 0
		}
		l, ok := unhex(b[2])
		if !ok {
			return escLiteral, 0, 1, 3
		}
		return escByte, rune(h<<4 | l), 3, 3
	}
}

// literal reports whether b begins with an escape introducer ('\\',
// '%', '=', '&') that every round and the '+' view read as itself,
// decided by bytes of b that no transducer changes or holds.
func (v *views) literal(b []byte) bool {
	switch b[0] {
	case '\\', '%', '=':
		kind, _, _, seen := decideQuiet(b)
		return kind == escLiteral && decidesAlike(b[1:seen])
	case '&':
		if len(b) < 2 || reintroduce[b[1]] || b[1] == '#' {
			return false
		}
		if !isAlnum(b[1]) {
			return true // a lone '&'
		}
		// A name: it stands for itself when it names no reference
		// (as entities.drain decides before the end of the text).
		n, capped, ok := entityEnd(b, false)
		seen := n + 1 // the byte after the name decided where it ends
		if b[n-1] == ';' {
			seen = n
		}
		if !ok || capped || seen > len(b) || !decidesAlike(b[1:seen]) {
			return false
		}
		w := string(b[:n])
		u := html.UnescapeString(w + "!")
		return u[:len(u)-1] == w
	}
	return false
}

// visibleLead reports whether b begins with the first byte of an
// invisible character's encoding that begins none, decided by bytes
// that follow it in every view: no line break (a view without line
// breaks would read the byte after the run next) and no introducer (a
// round may decode it and what follows into the rest of an invisible
// character). A '+' (a space in the '+' view) or another lead byte
// continues no invisible character in any view.
func visibleLead(b []byte) bool {
	k := 2
	if len(b) < 2 || newline[b[1]] || reintroduce[b[1]] {
		return false
	}
	if couldBeInvisible(b[:2]) {
		if len(b) < 3 || newline[b[2]] || reintroduce[b[2]] {
			return false
		}
		k = 3
	}
	return invisibleAt(b[:k]) == 0
}

// asIs reports whether every view reads b[0] as itself, right after the
// byte before it, with what decides it in b: a plain byte, an
// introducer every round reads as itself (literal), or a lead byte that
// begins no invisible character.
func (v *views) asIs(b []byte) bool {
	switch c := b[0]; {
	case !plainStop[c]:
		return true
	case c == 0xE2 || c == 0xEF || c == 0xC2:
		return visibleLead(b)
	}
	return v.literal(b)
}
