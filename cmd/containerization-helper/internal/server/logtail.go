package server

import (
	"log/slog"

	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/wire"
)

// deleteAnswer is container.delete's answer for container id, carrying
// the last helperapi.MaxLogBytes of its console log. The delete handler
// calls it after the container stopped (a forced delete's SIGTERM grace
// is over) and before removeFiles removes the log, so the answer holds
// what the container wrote while it stopped. The log is read as
// container.logs reads it (tail: opened with O_NOFOLLOW|O_NONBLOCK, a
// regular file only, at most MaxLogBytes read whatever its size). A log
// that cannot be read does not fail the delete: the answer then has no
// tail (HasLogTail false) and helper.delete_log_unread is logged.
func (s *Server) deleteAnswer(id string) *helperapi.DeleteResponse {
	r := &helperapi.DeleteResponse{ContainerID: id, Deleted: true}
	l, err := tail(s.logPath(id), helperapi.MaxLogBytes)
	if err != nil {
		s.log.Warn("helper.delete_log_unread", slog.String("container_id", id), slog.String("code", wire.CodeOf(err)))
		return r
	}
	r.HasLogTail, r.LogTail, r.LogTruncated = true, l.Data, l.Truncated
	return r
}

// replayAnswer is what durableIdem keeps of a mutation's answer v for an
// idempotent replay: v itself, except that a delete's log tail is left
// out (HasLogTail false). The state store bounds a kept answer (64 KiB)
// and the whole state.json (32 MiB), which a 1 MiB tail per delete would
// overflow; a replayed delete answer therefore has no log tail, and
// helperapi.DeleteResponse documents that.
func replayAnswer(v any) any {
	r, ok := v.(*helperapi.DeleteResponse)
	if !ok || !r.HasLogTail {
		return v
	}
	return &helperapi.DeleteResponse{ContainerID: r.ContainerID, Deleted: r.Deleted}
}
