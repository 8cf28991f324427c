package redact

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestSecretNeverPrints(t *testing.T) {
	t.Parallel()
	sec := NewSecret([]byte(canary))
	type exported struct{ S Secret }
	type unexported struct{ s Secret }
	vals := []any{sec, &sec, exported{sec}, unexported{sec}, &unexported{sec}, []Secret{sec}}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3s", "%T"} {
		for i, v := range vals {
			t.Run(fmt.Sprintf("%s/%d", verb, i), func(t *testing.T) {
				is := is.New(t)
				out := fmt.Sprintf(verb, v)
				is.True(!strings.Contains(out, canary))
				is.True(!strings.Contains(out, fmt.Sprint([]byte(canary)))) // decimal bytes
				is.True(!strings.Contains(out, fmt.Sprintf("%x", canary)))
			})
		}
	}
}

func TestSecretMarshalers(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	sec := NewSecret([]byte(canary))
	is.Equal(sec.String(), Redacted)
	is.Equal(sec.GoString(), Redacted)
	j, err := json.Marshal(map[string]any{"s": sec})
	is.NoErr(err)
	is.Equal(string(j), `{"s":"[REDACTED]"}`)
	txt, err := sec.MarshalText()
	is.NoErr(err)
	is.Equal(string(txt), Redacted)
	var buf bytes.Buffer
	is.NoErr(gob.NewEncoder(&buf).Encode(struct{ S Secret }{sec}))
	is.True(!bytes.Contains(buf.Bytes(), []byte(canary)))
	buf.Reset()
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("m", "s", sec)
	is.True(strings.Contains(buf.String(), `"s":"[REDACTED]"`))
}

func TestSecretBytesZero(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	src := []byte(canary)
	sec := NewSecret(src)
	clear(src) // NewSecret copied
	is.Equal(string(sec.Bytes()), canary)
	is.Equal(sec.Len(), len(canary))
	buf := sec.Bytes()
	cp := sec
	sec.Zero()
	is.Equal(buf, make([]byte, len(canary))) // overwritten in place
	is.Equal(cp.Len(), 0)                    // copies share the buffer
	is.Equal(cp.Bytes(), []byte(nil))
	var zero Secret
	zero.Zero()
	is.Equal(zero.Len(), 0)
}
