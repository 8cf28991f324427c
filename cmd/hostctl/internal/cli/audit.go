package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/peterbourgon/ff/v3/ffcli"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/wire"
)

// auditCmd is `hostctl audit tail|verify`: the daemons' audit logs, read
// straight from the files (docs/design.md, "Paths"), so both work while a
// daemon is down.
func auditCmd(g *globals) *ffcli.Command {
	return &ffcli.Command{
		Name:        "audit",
		ShortUsage:  "hostctl audit <tail|verify> [--daemon D] ...",
		ShortHelp:   "read and verify the daemons' audit logs",
		LongHelp:    "Reads <log>/<daemon>/audit.jsonl and its rotated files (audit.jsonl.1 is the newest) directly, so it works while a daemon is down. The system logs are readable by root only. See `hostctl help layout`.",
		FlagSet:     g.newFlagSet("audit"),
		Subcommands: []*ffcli.Command{auditTailCmd(g), auditVerifyCmd(g)},
		Exec:        groupExec("audit"),
	}
}

// auditLog is one daemon's audit log location.
type auditLog struct {
	daemon string
	dir    string
}

// auditLogs returns the logs --daemon selects: one, or every daemon's.
func (g *globals) auditLogs(which string) ([]auditLog, error) {
	names := daemon.Names
	if which != "" {
		if !slices.Contains(daemon.Names, which) {
			return nil, usageError{fmt.Sprintf("--daemon: want one of %s, got %q", strings.Join(daemon.Names, ", "), which)}
		}
		names = []string{which}
	}
	l, err := g.layout()
	if err != nil {
		return nil, err
	}
	out := make([]auditLog, 0, len(names))
	for _, n := range names {
		out = append(out, auditLog{daemon: n, dir: l.LogDir(n)})
	}
	return out, nil
}

// present reports whether the log has any file, and turns a permission
// error into exit code 4.
func (a auditLog) present() (bool, error) {
	ents, err := os.ReadDir(a.dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case errors.Is(err, fs.ErrPermission):
		return false, exitError{code: ExitDenied, msg: fmt.Sprintf("%s: cannot read %s: permission denied (the system audit logs are root's: run with sudo)", audit.CodeIO, a.dir)}
	case err != nil:
		return false, wire.Wrap(audit.CodeIO, "cannot read "+a.dir, err)
	}
	for _, e := range ents {
		if e.Name() == daemon.AuditFile || strings.HasPrefix(e.Name(), daemon.AuditFile+".") {
			return true, nil
		}
	}
	return false, nil
}

// deniedOr maps a permission error under err to exit code 4.
func deniedOr(err error, what string) error {
	if errors.Is(err, fs.ErrPermission) {
		return exitError{code: ExitDenied, msg: fmt.Sprintf("%s: cannot read %s: permission denied (run with sudo)", audit.CodeIO, what)}
	}
	return err
}

func auditTailCmd(g *globals) *ffcli.Command {
	fs := g.newFlagSet("audit tail")
	which := fs.String("daemon", "", "only this daemon's log: "+strings.Join(daemon.Names, ", ")+" (default: all, merged by time)")
	n := fs.Int("n", 20, "print the last N records")
	follow := fs.Bool("f", false, "keep printing new records as they are appended (Ctrl-C stops); with --json, one record per line")
	return &ffcli.Command{
		Name:       "tail",
		ShortUsage: "hostctl audit tail [-f] [--daemon D] [-n N] [--json]",
		ShortHelp:  "print the last audit records",
		LongHelp:   "Prints the last N records of each selected log, oldest first, without verifying the chain (see `hostctl audit verify`). Exits 3 when no selected log exists (without -f).",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{"audit tail takes no arguments"}
			}
			if *n < 0 {
				return usageError{"-n must be 0 or more"}
			}
			logs, err := g.auditLogs(*which)
			if err != nil {
				return err
			}
			return g.auditTail(ctx, logs, *n, *follow)
		},
	}
}

// tailed is a record with the log it came from.
type tailed struct {
	log audit.Record
	idx int // the log's index, for a stable merge
}

func (g *globals) auditTail(ctx context.Context, logs []auditLog, n int, follow bool) error {
	var recs []tailed
	last := make([]uint64, len(logs))
	found := 0
	for i, l := range logs {
		ok, err := l.present()
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		found++
		rs, err := audit.ReadTail(l.dir, daemon.AuditFile, max(n, 1))
		if err != nil {
			return deniedOr(err, l.dir)
		}
		if len(rs) > 0 {
			last[i] = rs[len(rs)-1].Seq
		}
		if n == 0 {
			continue
		}
		for _, r := range rs {
			recs = append(recs, tailed{r, i})
		}
	}
	if found == 0 && !follow {
		return exitError{code: ExitNotFound, msg: "no audit log found in " + logDirs(logs)}
	}
	sort.SliceStable(recs, func(a, b int) bool {
		ra, rb := recs[a].log, recs[b].log
		if !ra.Time.Equal(rb.Time) {
			return ra.Time.Before(rb.Time)
		}
		if recs[a].idx != recs[b].idx {
			return recs[a].idx < recs[b].idx
		}
		return ra.Seq < rb.Seq
	})
	if len(recs) > n {
		recs = recs[len(recs)-n:]
	}
	out := make([]audit.Record, len(recs))
	for i, r := range recs {
		out[i] = r.log
	}
	if !follow {
		if g.json {
			return writeJSON(g.stdout, map[string]any{"records": out})
		}
		for _, r := range out {
			if _, err := fmt.Fprintln(g.stdout, formatRecord(r)); err != nil {
				return err
			}
		}
		return nil
	}
	p := &recordPrinter{w: g.stdout, json: g.json}
	for _, r := range out {
		if err := p.print(r); err != nil {
			return err
		}
	}
	return followLogs(ctx, logs, last, p)
}

// followLogs follows every log from after last[i] until ctx ends (a clean
// stop) or one fails.
func followLogs(ctx context.Context, logs []auditLog, last []uint64, p *recordPrinter) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(logs))
	for i, l := range logs {
		go func() {
			err := audit.Follow(ctx, l.dir, daemon.AuditFile, last[i]+1, p.print)
			if err != nil && !errors.Is(err, context.Canceled) {
				err = deniedOr(err, l.dir)
			} else {
				err = nil
			}
			errs <- err
		}()
	}
	var first error
	for range logs {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

// recordPrinter prints records from several goroutines, one whole line at
// a time.
type recordPrinter struct {
	mu   sync.Mutex
	w    io.Writer
	json bool
}

func (p *recordPrinter) print(r audit.Record) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintln(p.w, formatRecord(r))
	return err
}

// formatRecord is a record's human line:
//
//	TIME DAEMON #SEQ OP[/PHASE] OUTCOME [CODE] uid=U pid=P [corr=C] [key=value ...]
//
// with the time in UTC to the millisecond and fields sorted by key.
func formatRecord(r audit.Record) string {
	var b strings.Builder
	b.WriteString(r.Time.UTC().Format("2006-01-02T15:04:05.000Z"))
	fmt.Fprintf(&b, " %s #%d %s", r.Daemon, r.Seq, r.Op)
	if r.Phase != audit.PhaseNone {
		b.WriteString("/" + string(r.Phase))
	}
	b.WriteString(" " + string(r.Outcome))
	if r.Code != "" {
		b.WriteString(" " + r.Code)
	}
	fmt.Fprintf(&b, " uid=%d pid=%d", r.Actor.UID, r.Actor.PID)
	if r.Corr != "" {
		b.WriteString(" corr=" + r.Corr)
	}
	keys := make([]string, 0, len(r.Fields))
	for k := range r.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(" " + k + "=" + fieldText(r.Fields[k]))
	}
	return b.String()
}

// fieldText prints a field value: numbers and simple words as they are,
// other strings quoted, lists and maps as compact JSON.
func fieldText(v any) string {
	switch x := v.(type) {
	case string:
		if x != "" && !strings.ContainsAny(x, " \t\n\"'=\\") && strconv.CanBackquote(x) {
			return x
		}
		return strconv.Quote(x)
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return "null"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

func logDirs(logs []auditLog) string {
	dirs := make([]string, len(logs))
	for i, l := range logs {
		dirs[i] = l.dir
	}
	return strings.Join(dirs, ", ")
}

// verifyRow is one log's line in `hostctl audit verify` (and its JSON).
type verifyRow struct {
	Daemon   string `json:"daemon"`          // the daemon whose log this is (secretd, egressd, ...)
	Dir      string `json:"dir"`             // the log's directory
	Present  bool   `json:"present"`         // the log exists; the other counts are 0 when not
	OK       bool   `json:"ok"`              // the chain verified: every record valid, seq +1, prev linked
	Files    int    `json:"files"`           // files read, rotated and active
	Records  int    `json:"records"`         // records in the chain
	FirstSeq uint64 `json:"first_seq"`       // the first record's seq; 0 when none
	LastSeq  uint64 `json:"last_seq"`        // the last record's seq; 0 when none
	Torn     int    `json:"torn"`            // torn lines skipped (a write cut by a crash)
	Code     string `json:"code,omitempty"`  // why it did not verify (audit.chain_broken, audit.corrupt, ...)
	Error    string `json:"error,omitempty"` // the failure's message
}

func auditVerifyCmd(g *globals) *ffcli.Command {
	fs := g.newFlagSet("audit verify")
	which := fs.String("daemon", "", "only this daemon's log: "+strings.Join(daemon.Names, ", ")+" (default: every log present)")
	return &ffcli.Command{
		Name:       "verify",
		ShortUsage: "hostctl audit verify [--daemon D] [--json]",
		ShortHelp:  "check the hash chain of the audit logs, across rotation",
		LongHelp:   "Reads every file of each log, oldest first, and checks that each record's seq follows the one before and that its prev is the SHA-256 of the line before (lib/audit Verify). Exits 1 when a chain is broken or a line is corrupt, 3 when no selected log exists.",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{"audit verify takes no arguments"}
			}
			logs, err := g.auditLogs(*which)
			if err != nil {
				return err
			}
			return g.auditVerify(logs)
		},
	}
}

func (g *globals) auditVerify(logs []auditLog) error {
	rows := make([]verifyRow, 0, len(logs))
	var broken []string
	var firstBad *verifyRow
	found := 0
	for _, l := range logs {
		row := verifyRow{Daemon: l.daemon, Dir: l.dir}
		ok, err := l.present()
		if err != nil {
			return err
		}
		row.Present = ok
		if ok {
			found++
			rep, err := audit.Verify(l.dir, daemon.AuditFile)
			if err != nil && errors.Is(err, fs.ErrPermission) {
				return deniedOr(err, l.dir)
			}
			row.Files, row.Records, row.FirstSeq, row.LastSeq, row.Torn = rep.Files, rep.Records, rep.FirstSeq, rep.LastSeq, rep.Torn
			if err != nil {
				row.Code = wire.CodeOf(err)
				var we *wire.Error
				if errors.As(err, &we) {
					row.Error = we.Msg
				} else {
					row.Error = err.Error()
				}
				broken = append(broken, l.daemon)
			} else {
				row.OK = true
			}
		}
		rows = append(rows, row)
		if row.Code != "" && firstBad == nil {
			firstBad = &rows[len(rows)-1]
		}
	}
	if found == 0 {
		return exitError{code: ExitNotFound, msg: "no audit log found in " + logDirs(logs)}
	}
	if err := g.printVerify(rows); err != nil {
		return err
	}
	if firstBad != nil {
		return exitError{code: ExitFailure, msg: fmt.Sprintf("%s: %s: %s (logs failing: %s)", firstBad.Code, firstBad.Daemon, firstBad.Error, strings.Join(broken, ", "))}
	}
	return nil
}

func (g *globals) printVerify(rows []verifyRow) error {
	if g.json {
		return writeJSON(g.stdout, map[string]any{"logs": rows})
	}
	out := make([][]string, 0, len(rows))
	for _, r := range rows {
		result, seqs := "no log", "-"
		switch {
		case r.OK:
			result = "ok"
		case r.Code != "":
			result = r.Code
		}
		if r.Records > 0 {
			seqs = fmt.Sprintf("%d-%d", r.FirstSeq, r.LastSeq)
		}
		out = append(out, []string{r.Daemon, r.Dir, strconv.Itoa(r.Files), strconv.Itoa(r.Records), seqs, strconv.Itoa(r.Torn), result})
	}
	return table(g.stdout, []string{"DAEMON", "DIR", "FILES", "RECORDS", "SEQ", "TORN", "RESULT"}, out)
}
