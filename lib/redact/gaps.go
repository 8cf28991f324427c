package redact

// The streaming forms of the views that remove what may stand between a
// form's characters: short runs of line breaks (dropNewlines) and of
// invisible characters (stripInvisible). Like the escape transducers
// (transduce.go), each holds back only a run it has not seen the end of.

// newlines is dropNewlines as a stream.
type newlines struct {
	run  []vbyte // a run of CR and LF, at most MaxLineBreak long
	long bool    // the current run is past the bound: it stays
}

func (l *newlines) held() (int64, bool) {
	if len(l.run) == 0 {
		return 0, false
	}
	return l.run[0].org, true
}

func (l *newlines) push(c byte, org int64, out []vbyte) []vbyte {
	if newline[c] {
		if l.long {
			return append(out, vbyte{c, org})
		}
		l.run = append(l.run, vbyte{c, org})
		if len(l.run) > MaxLineBreak {
			out = append(out, l.run...)
			l.run, l.long = l.run[:0], true
		}
		return out
	}
	l.run, l.long = l.run[:0], false
	return append(out, vbyte{c, org})
}

func (l *newlines) clone(m *newlines) {
	l.run, l.long = append(l.run[:0], m.run...), m.long
}

func (l *newlines) flush(out []vbyte) []vbyte {
	l.run, l.long = l.run[:0], false
	return out
}

// invisibles is stripInvisible as a stream.
type invisibles struct {
	pend  []vbyte // bytes not yet read: at most the start of one character
	run   []vbyte // the current run of invisible characters
	count int     // characters in run (past MaxInvisibleRun: it stays)
}

func (v *invisibles) held() (int64, bool) {
	switch {
	case len(v.run) > 0:
		return v.run[0].org, true
	case len(v.pend) > 0:
		return v.pend[0].org, true
	}
	return 0, false
}

func (v *invisibles) idle() bool { return len(v.pend) == 0 && v.count == 0 }

func (v *invisibles) clone(m *invisibles) {
	v.pend, v.run, v.count = append(v.pend[:0], m.pend...), append(v.run[:0], m.run...), m.count
}

func (v *invisibles) push(c byte, org int64, out []vbyte) []vbyte {
	if len(v.pend) == 0 && v.count == 0 && c != 0xE2 && c != 0xEF && c != 0xC2 {
		return append(out, vbyte{c, org})
	}
	v.pend = append(v.pend, vbyte{c, org})
	return v.drain(false, out)
}

func (v *invisibles) flush(out []vbyte) []vbyte {
	out = v.drain(true, out)
	return v.endRun(out)
}

func (v *invisibles) drain(eof bool, out []vbyte) []vbyte {
	var bs [3]byte
	for len(v.pend) > 0 {
		b := bs[:0]
		for _, p := range v.pend {
			b = append(b, p.c)
		}
		n := invisibleAt(b)
		if n == 0 && !eof && couldBeInvisible(b) {
			return out
		}
		if n == 0 {
			out = v.endRun(out)
			out = append(out, v.pend[0])
			v.pend = v.pend[:copy(v.pend, v.pend[1:])]
			continue
		}
		v.count++
		if v.count > MaxInvisibleRun {
			out = append(out, v.run...)
			out = append(out, v.pend[:n]...)
			v.run = v.run[:0]
		} else {
			v.run = append(v.run, v.pend[:n]...)
		}
		v.pend = v.pend[:copy(v.pend, v.pend[n:])]
	}
	return out
}

// endRun ends a run of invisible characters: a short one is removed.
func (v *invisibles) endRun(out []vbyte) []vbyte {
	v.run, v.count = v.run[:0], 0
	return out
}

// couldBeInvisible reports whether b, shorter than an invisible
// character, may be the start of one.
func couldBeInvisible(b []byte) bool {
	switch {
	case len(b) == 0:
		return false
	case b[0] == 0xC2:
		return len(b) < 2
	case b[0] == 0xE2:
		return len(b) < 2 || len(b) < 3 && (b[1] == 0x80 || b[1] == 0x81)
	case b[0] == 0xEF:
		return len(b) < 2 || len(b) < 3 && b[1] == 0xBB
	}
	return false
}
