package audit

import (
	"bufio"
	"errors"
	"io"
)

// lineReader splits a stream into lines of any length.
type lineReader struct{ br *bufio.Reader }

// newLineReader returns a lineReader over r.
func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next line without its newline and whether it had one;
// io.EOF once no bytes remain.
func (l *lineReader) next() ([]byte, bool, error) {
	line, err := l.br.ReadBytes('\n')
	if errors.Is(err, io.EOF) {
		if len(line) == 0 {
			return nil, false, io.EOF
		}
		return line, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return line[:len(line)-1], true, nil
}
