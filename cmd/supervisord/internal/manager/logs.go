package manager

import (
	"context"
	"io"
	"os"
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/holder"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// tail returns the last n bytes of the current output log and its size.
func tail(path string, n int64) ([]byte, int64, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	off := max(fi.Size()-n, 0)
	b := make([]byte, fi.Size()-off)
	_, err = io.ReadFull(io.NewSectionReader(f, off, int64(len(b))), b)
	return b, fi.Size(), err
}

func tailBytes(req *api.LogsRequest) int64 {
	if req.TailBytes <= 0 {
		return api.DefaultTailBytes
	}
	return min(req.TailBytes, api.MaxTailBytes)
}

// Logs returns the tail of instance id's output log.
func (m *Manager) Logs(ctx context.Context, req *api.LogsRequest) (*api.LogsResponse, error) {
	md, err := m.load(req.InstanceID)
	if err != nil {
		return nil, err
	}
	if isContainer(md) {
		return m.containerLogs(ctx, md, req) // container.go
	}
	if req.Follow {
		return &api.LogsResponse{Warning: m.Warning()}, nil
	}
	b, _, err := tail(m.st.Path(md.ID, store.FileLog), tailBytes(req))
	return &api.LogsResponse{Data: b, Warning: m.Warning()}, err
}

// FollowLogs streams the tail, then the log as it grows (following
// rotation), then an exit frame once the instance has ended.
func (m *Manager) FollowLogs(ctx context.Context, call *rpc.Call, st *rpc.Stream) error {
	// The Handler accepted this body already; the stream reads it again
	// rather than have the Handler keep it (rpc.Call.Keep) for one flag.
	req, err := rpc.Decode[api.LogsRequest](call)
	if err != nil {
		return err
	}
	if !req.Follow {
		return nil // the tail went in the answer
	}
	id, _ := api.CanonicalID(req.InstanceID)
	path := m.st.Path(id, store.FileLog)
	b, pos, err := tail(path, tailBytes(req))
	if err != nil {
		return err
	}
	send := func(f *wire.StreamFrame) error {
		st.Conn().SetWriteDeadline(time.Now().Add(5 * time.Second))
		return st.Send(f)
	}
	if len(b) > 0 {
		if err := send(&wire.StreamFrame{T: wire.StreamData, B: b}); err != nil {
			return nil
		}
	}
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		for {
			if f, err := st.Recv(); err != nil || f.Ends() {
				return
			}
		}
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var ex store.ExitRecord
		ended := m.st.ReadJSON(id, store.FileExit, &ex) == nil
		chunk, size, _ := readFrom(path, pos)
		if size < pos {
			pos = 0 // rotated: the new file starts over
			continue
		}
		if len(chunk) > 0 {
			pos += int64(len(chunk))
			if err := send(&wire.StreamFrame{T: wire.StreamData, B: chunk}); err != nil {
				return nil
			}
			continue
		}
		if ended || (!m.h.alive(id) && !ended) {
			e := ex.Exit
			return send(&wire.StreamFrame{T: wire.StreamExit, Status: holder.ExitCode(&e)})
		}
		select {
		case <-ctx.Done():
			return nil
		case <-gone:
			return nil
		case <-tick.C:
		}
	}
}

// readFrom reads up to 256 KiB of path from off, and the file's size.
func readFrom(path string, off int64) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() <= off {
		return nil, fi.Size(), err
	}
	b := make([]byte, min(fi.Size()-off, 256<<10))
	n, err := f.ReadAt(b, off)
	return b[:n], fi.Size(), err
}
