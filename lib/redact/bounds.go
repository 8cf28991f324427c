package redact

// Bounds of the forms a Scrubber recognises. Each form spells one byte of
// a held value with at most a fixed number of bytes of text, and every
// form that lets text sit between the value's characters (separators,
// invisible characters, line breaks, levels of escaping) lets only a
// fixed amount sit there: past a bound, the text is not recognised. A
// scanner that sees text in pieces (a stream) must hold back enough of
// one piece to find a value that straddles two; MaxSpan and
// MaxDecodedSpan give that length, and are computed from the constants
// below, so they move with them.
//
// The forms, and the bytes of text one byte of the value takes in each
// (at most):
//
//	form (method)                                  bytes per value byte
//	raw (Contains, Scrub)                          1
//	percent-encoded (query, path, every byte)      3  (SpanPercent)
//	base64, both alphabets, any alignment          2  (SpanBase64; 4 per 3, and 8 for the shortest value, 4 bytes)
//	hex, lower or upper case                       2  (SpanHex)
//	JSON string body (\u00XX at worst)             6  (SpanJSON)
//	separated hex (ContainsDecoded)                5  (SpanSeparatedHex: a pair, then at most MaxHexSeparators separators)
//
// ContainsDecoded also reads text in views, each of which lets more text
// sit inside a form, per character of the form: at most MaxInvisibleRun
// invisible characters of at most MaxInvisibleBytes bytes each, and at
// most MaxLineBreak CR or LF bytes (SpanGap in all, per character); and
// it undoes up to MaxDecodeLevels levels of escapes, each of which spells
// one byte with at most SpanEscape bytes (a named character reference,
// at worst) and may add one quoted-printable soft line break
// (SpanSoftBreak bytes) after it.
const (
	// MaxHexSeparators is how many separator bytes ('-', ':', '.', ' ')
	// may stand between two hex pairs of the separated-hex form
	// ("de:ad:be:ef", "de - ad"). Separators inside a pair are not
	// recognised.
	MaxHexSeparators = 3
	// MaxInvisibleRun is how many invisible characters (U+200B ZERO
	// WIDTH SPACE, U+200C ZERO WIDTH NON-JOINER, U+200D ZERO WIDTH
	// JOINER, U+2060 WORD JOINER, U+FEFF ZERO WIDTH NO-BREAK SPACE,
	// U+00AD SOFT HYPHEN) may stand between two characters of a form.
	MaxInvisibleRun = 2
	// MaxInvisibleBytes is the UTF-8 length of the longest invisible
	// character (U+00AD takes 2 bytes, the others 3).
	MaxInvisibleBytes = 3
	// MaxLineBreak is how many CR or LF bytes may stand between two
	// characters of a form in the views without line breaks (one CRLF,
	// or two LFs: base64 or a value wrapped at a line length).
	MaxLineBreak = 2
	// MaxDecodeLevels is how many levels of escapes ContainsDecoded
	// undoes on top of the exact forms: a value percent-encoded four
	// times over, in any mix of encoded and plain bytes, is found and
	// five times over it is not; when the first level is itself an
	// exact form (every byte, url.QueryEscape), five levels are found
	// and six are not.
	MaxDecodeLevels = 4
	// MaxRefDigits and MaxRefHexDigits bound the digits of a numeric
	// character reference (&#65; &#x41;): enough for U+10FFFF; one with
	// more (leading zeros) is not decoded.
	MaxRefDigits    = 7
	MaxRefHexDigits = 6
)

// Bytes of text per byte of the value, at most, for each form and view
// (see the table above).
const (
	SpanRaw          = 1
	SpanPercent      = 3
	SpanBase64       = 2
	SpanHex          = 2
	SpanJSON         = 6
	SpanSeparatedHex = SpanHex + MaxHexSeparators
	// SpanExact is the widest form Contains and Scrub match.
	SpanExact = SpanJSON
	// SpanGap is what a view may let stand after each character of a
	// form: invisible characters and a line break.
	SpanGap = MaxInvisibleRun*MaxInvisibleBytes + MaxLineBreak
	// SpanEscape is the longest escape of one byte that one level
	// undoes: "&DiacriticalGrave;" (18 bytes) for "`"; numeric
	// references take at most 10 ("&#x00003F;"), JSON \u escapes 6.
	SpanEscape = 18
	// SpanSoftBreak is a quoted-printable soft line break ("=\r\n"):
	// one level removes at most one after each byte.
	SpanSoftBreak = 3
)

// MaxSpan returns the most bytes of text that a form Contains or Scrub
// matches can take for a value of n bytes.
func MaxSpan(n int) int { return n * SpanExact }

// MaxDecodedSpan returns the most bytes of text that a form
// ContainsDecoded recognises can take for a value of n bytes: the widest
// form (exact or separated hex), a gap after every character of it, and
// each of MaxDecodeLevels levels of escapes spelling every byte with
// SpanEscape bytes and a soft line break. It is large (the levels
// multiply), so Stream and Detector do not hold back this much: they
// undo escapes as the text passes and hold back only an unfinished
// escape at each level and what the innermost forms need (a partial
// match, at most the longest form).
func MaxDecodedSpan(n int) int {
	span := n * max(SpanExact, SpanSeparatedHex) * (1 + SpanGap)
	for range MaxDecodeLevels {
		span *= SpanEscape + SpanSoftBreak
	}
	return span
}
