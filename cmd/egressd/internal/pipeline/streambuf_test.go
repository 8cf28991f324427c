package pipeline

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/redact"
)

// TestStreamBuffers: a stream waiting for its next small event holds no
// pooled buffer, a bulk piece takes them, and what comes out is the
// scrubbed body byte for byte while other streams use the same pool
// (with a value registered, and with nothing registered, where the
// scrubber hands back the read buffer itself).
func TestStreamBuffers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		creds bool
	}{
		{name: "scrubbed", creds: true},
		{name: "nothing registered", creds: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			const streams = 3
			// Each handler waits at three gates: before the bulk piece,
			// before event b, before the end.
			var gates [streams][3]chan struct{}
			for i := range gates {
				for g := range gates[i] {
					gates[i][g] = make(chan struct{})
				}
			}
			up := &upstream{handler: func(w http.ResponseWriter, r *http.Request, s seen) {
				i, _ := strconv.Atoi(r.URL.Query().Get("i"))
				v := strings.TrimPrefix(s.Header.Get("Authorization"), "Bearer ")
				fl := w.(http.Flusher)
				wait := func(g int) bool {
					select {
					case <-gates[i][g]:
						return true
					case <-r.Context().Done():
						return false
					}
				}
				io.WriteString(w, "data: a\n\n")
				fl.Flush()
				if !wait(0) {
					return
				}
				io.WriteString(w, blob(i, v))
				fl.Flush()
				if !wait(1) {
					return
				}
				io.WriteString(w, "data: b\n\n")
				fl.Flush()
				wait(2)
			}}
			srv := httptest.NewServer(up)
			defer srv.Close()
			base := "http://127.0.0.1:" + strconv.Itoa(port(srv))
			f := newFixture(t, fixtureConfig{})
			if tc.creds {
				f.register("inv", []secretdapi.Lease{lease(base, "header:Authorization", "Bearer {}")})
			} else {
				f.register("inv", nil, base)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			sts := make([]*Stream, streams)
			got := make([]strings.Builder, streams)
			for i := range sts {
				st, err := f.p.DoStream(ctx, Input{Invocation: "inv", Method: "GET", URL: base + "/?i=" + strconv.Itoa(i)})
				is.NoErr(err)
				defer st.Close()
				sts[i] = st
				piece, err := st.Next()
				is.NoErr(err)
				got[i].Write(piece)
			}
			// Every stream now waits for its next event: none holds a
			// large buffer, each its small one.
			is.Equal(f.p.bufs.taken.Load(), uint64(0))
			is.Equal(f.p.smalls.out.Load(), int64(streams))
			waitNoneOut(t, &f.p.bufs)

			// The bulk pieces of all streams at once, through one pool.
			var wg sync.WaitGroup
			for i, st := range sts {
				close(gates[i][0])
				wg.Go(func() {
					for got[i].Len() < len("data: a\n\n")+len(blob(i, canary))-64 {
						piece, err := st.Next()
						if err != nil {
							t.Errorf("stream %d: %v", i, err)
							return
						}
						got[i].Write(piece)
					}
				})
			}
			wg.Wait()
			is.True(f.p.bufs.taken.Load() > 0) // the bulk pieces took pooled buffers

			// Event b after the bulk piece: a stream that waits again
			// gives its pooled buffers back first.
			done := make([]chan struct{}, streams)
			for i, st := range sts {
				close(gates[i][1])
				for !strings.Contains(got[i].String(), "data: b") {
					piece, err := st.Next()
					is.NoErr(err)
					got[i].Write(piece)
				}
				done[i] = make(chan struct{})
				go func() {
					defer close(done[i])
					for {
						piece, err := st.Next()
						got[i].Write(piece)
						if err == io.EOF {
							return
						}
						if err != nil {
							t.Errorf("stream %d: %v", i, err)
							return
						}
					}
				}()
			}
			waitNoneOut(t, &f.p.bufs)
			for i := range sts {
				close(gates[i][2])
				<-done[i]
			}
			is.Equal(f.p.bufs.out.Load(), int64(0)) // and at the end
			is.Equal(f.p.smalls.out.Load(), int64(0))
			for i := range sts {
				want := "data: a\n\n" + blob(i, "") + "data: b\n\n" // no value to echo
				if tc.creds {
					want = strings.ReplaceAll("data: a\n\n"+blob(i, canary)+"data: b\n\n", canary, redact.Redacted)
				}
				is.Equal(got[i].Len(), len(want))
				is.True(got[i].String() == want) // the body, byte for byte
				f.outputs = append(f.outputs, got[i].String())
			}
		})
	}
}

// blob is stream i's bulk piece: 100,000 bytes of printable text (not a
// multiple of any buffer size) with v in the middle.
func blob(i int, v string) string {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	const alphabet = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ.,;:\n"
	b := make([]byte, 100_000)
	for j := range b {
		b[j] = alphabet[r.IntN(len(alphabet))]
	}
	mid := len(b) / 2
	return string(b[:mid]) + " " + v + " " + string(b[mid:]) + "."
}

// waitNoneOut waits (generously: a loaded machine) until no pooled
// buffer is out of the pool.
func waitNoneOut(t *testing.T, b *bufPool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); b.out.Load() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d pooled buffers still held by waiting streams", b.out.Load())
		}
	}
}
