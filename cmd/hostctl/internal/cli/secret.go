package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/daemon"
)

// secretCmd is `hostctl secret put|list|delete`: credentials in secretd.
func secretCmd(g *globals) *ffcli.Command {
	return &ffcli.Command{
		Name:        "secret",
		ShortUsage:  "hostctl secret <put|list|delete> ...",
		ShortHelp:   "manage the credentials secretd holds",
		LongHelp:    "Credentials are stored by secretd and handed out only as one-shot leases. A value is read from a file or stdin, never from a command-line argument. See docs/secretd.md.",
		FlagSet:     g.newFlagSet("secret"),
		Subcommands: []*ffcli.Command{secretPutCmd(g), secretListCmd(g), secretDeleteCmd(g)},
		Exec:        groupExec("secret"),
	}
}

// stringsFlag collects a repeatable flag.
type stringsFlag []string

// String joins the values with commas.
func (s *stringsFlag) String() string { return strings.Join(*s, ",") }

// Set appends one value.
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

func secretPutCmd(g *globals) *ffcli.Command {
	fs := g.newFlagSet("secret put")
	fromFile := fs.String("from-file", "", "read the value from this file")
	fromStdin := fs.Bool("from-stdin", false, "read the value from standard input")
	var allow, targets stringsFlag
	fs.Var(&allow, "allow", "allowed destination, a canonical origin such as https://api.example.com (repeatable)")
	fs.Var(&targets, "target", "allowed target: header:<Name>[=<template>], query:<param>, path:<name>, body:<JSON pointer>, basic:password or basic:user (repeatable; a header target's own template, e.g. 'header:X-Api-Key={}', wins over --template)")
	template := fs.String("template", "", "template for header targets without their own, with {} once (default {})")
	overwrite := fs.Bool("overwrite", false, "header targets: replace a header the agent already set (default: refuse)")
	basicUser := fs.String("basic-user", "", "basic:password target: the user-id egressd sends with the password, whatever user the agent sent (default: the agent's)")
	keepNL := fs.Bool("keep-newline", false, "keep one trailing newline of the value (it is stripped by default)")
	return &ffcli.Command{
		Name:       "put",
		ShortUsage: "hostctl secret put NAME (--from-file F | --from-stdin) --allow ORIGIN... --target T[=TEMPLATE]... [--template 'Bearer {}'] [--overwrite] [--basic-user U]",
		ShortHelp:  "store or replace a credential",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			name, err := oneName(fs, args, "secret put")
			if err != nil {
				return err
			}
			if (*fromFile == "") == !*fromStdin {
				return usageError{"give exactly one of --from-file or --from-stdin (a value is never taken from an argument)"}
			}
			if len(allow) == 0 || len(targets) == 0 {
				return usageError{"give at least one --allow and one --target"}
			}
			value, err := readValue(g.stdin, *fromFile, *keepNL)
			if err != nil {
				return err
			}
			defer clear(value)
			req := &secretdapi.CredentialPutRequest{Destinations: allow, Name: name, Value: value}
			req.Targets, err = targetSpecs(targets, *template, *overwrite, *basicUser)
			if err != nil {
				return err
			}
			c, err := g.client(daemon.NameSecretd)
			if err != nil {
				return err
			}
			defer c.Close()
			out, err := secretdapi.NewClient(c).CredentialPut(ctx, req, "")
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, out)
			}
			_, err = fmt.Fprintf(g.stdout, "stored %s (version %d)\n", out.Name, out.Version)
			return err
		},
	}
}

// targetSpecs builds a credential's targets from the --target values: a
// header target may carry its own template after '=' (a header name
// never holds one), else it takes template; overwrite applies to header
// targets and basicUser to basic:password. A flag that would apply to no
// target is a usage error rather than silently dropped. secretd checks
// the rest (credential.invalid).
func targetSpecs(targets []string, template string, overwrite bool, basicUser string) ([]secretdapi.TargetSpec, error) {
	var out []secretdapi.TargetSpec
	headers, templated, basicPW := false, false, false
	for _, t := range targets {
		spec := secretdapi.TargetSpec{Target: t}
		switch {
		case strings.HasPrefix(t, "header:"):
			headers = true
			spec.Overwrite = overwrite
			if name, tmpl, ok := strings.Cut(t, "="); ok {
				spec.Target, spec.Template = name, tmpl
			} else {
				spec.Template, templated = template, true
			}
		case t == secretdapi.TargetBasicPassword:
			basicPW = true
			spec.BasicUser = basicUser
		}
		out = append(out, spec)
	}
	if template != "" && !templated {
		return nil, usageError{"--template applies to header targets without a template of their own; give a --target header:<Name>"}
	}
	if overwrite && !headers {
		return nil, usageError{"--overwrite applies to header targets; give a --target header:<Name>"}
	}
	if basicUser != "" && !basicPW {
		return nil, usageError{"--basic-user applies to the basic:password target; give --target basic:password"}
	}
	return out, nil
}

// oneName takes the single NAME argument; flags may follow it.
func oneName(fs *flag.FlagSet, args []string, cmd string) (string, error) {
	if len(args) == 0 {
		return "", usageError{cmd + " needs a NAME"}
	}
	name := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return "", usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return "", usageError{cmd + " takes one NAME; a value is never read from an argument"}
	}
	return name, nil
}

// readValue reads a value of at most secretdapi.MaxValueLen bytes from a
// file or stdin, dropping one trailing "\n" or "\r\n" unless keepNL.
func readValue(stdin io.Reader, file string, keepNL bool) ([]byte, error) {
	r := stdin
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	buf := bytes.NewBuffer(make([]byte, 0, 4096))
	if _, err := io.Copy(buf, io.LimitReader(r, secretdapi.MaxValueLen+3)); err != nil {
		return nil, fmt.Errorf("reading the value: %w", err)
	}
	v := buf.Bytes()
	if !keepNL {
		v = bytes.TrimSuffix(v, []byte("\n"))
		v = bytes.TrimSuffix(v, []byte("\r"))
	}
	if len(v) == 0 || len(v) > secretdapi.MaxValueLen {
		clear(buf.Bytes())
		return nil, usageError{fmt.Sprintf("the value must be 1..%d bytes", secretdapi.MaxValueLen)}
	}
	return v, nil
}

func secretListCmd(g *globals) *ffcli.Command {
	return &ffcli.Command{
		Name:       "list",
		ShortUsage: "hostctl secret list [--json]",
		ShortHelp:  "list credentials (metadata only, never values)",
		FlagSet:    g.newFlagSet("secret list"),
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{"secret list takes no arguments"}
			}
			c, err := g.client(daemon.NameSecretd)
			if err != nil {
				return err
			}
			defer c.Close()
			out, err := secretdapi.NewClient(c).CredentialList(ctx)
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, credentialsJSON(out.Credentials))
			}
			rows := make([][]string, 0, len(out.Credentials))
			for _, m := range out.Credentials {
				var ts []string
				for _, t := range m.Targets {
					ts = append(ts, t.Target)
				}
				rows = append(rows, []string{m.Name, m.Source, fmt.Sprint(m.Version), strings.Join(m.Destinations, ","),
					strings.Join(ts, ","), msTime(m.UpdatedAt)})
			}
			return table(g.stdout, []string{"NAME", "SOURCE", "VERSION", "DESTINATIONS", "TARGETS", "UPDATED"}, rows)
		},
	}
}

// credentialJSON is a credential's metadata in `secret list --json`.
type credentialJSON struct {
	Name         string       `json:"name"`          // the credential's name
	Source       string       `json:"source"`        // "store" or "systemd"
	Version      uint64       `json:"version"`       // 1 on first put, +1 on each replace
	Destinations []string     `json:"destinations"`  // canonical origins
	Targets      []targetJSON `json:"targets"`       // sorted by target
	CreatedAt    int64        `json:"created_at_ms"` // Unix ms
	UpdatedAt    int64        `json:"updated_at_ms"` // Unix ms
}

// targetJSON is one target in `secret list --json`.
type targetJSON struct {
	Target    string `json:"target"`               // header:<Name>, query:<param>, path:<name>, body:<pointer>, basic:password or basic:user
	Template  string `json:"template,omitempty"`   // header targets: the value with `{}` for the credential
	Overwrite bool   `json:"overwrite,omitempty"`  // header targets: replace a header the agent sent
	BasicUser string `json:"basic_user,omitempty"` // basic:password: the fixed user-id
}

func credentialsJSON(ms []secretdapi.CredentialMeta) map[string]any {
	out := make([]credentialJSON, 0, len(ms))
	for _, m := range ms {
		c := credentialJSON{Name: m.Name, Source: m.Source, Version: m.Version, Destinations: m.Destinations,
			CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, Targets: []targetJSON{}}
		for _, t := range m.Targets {
			c.Targets = append(c.Targets, targetJSON{Target: t.Target, Template: t.Template, Overwrite: t.Overwrite, BasicUser: t.BasicUser})
		}
		out = append(out, c)
	}
	return map[string]any{"credentials": out}
}

func secretDeleteCmd(g *globals) *ffcli.Command {
	fs := g.newFlagSet("secret delete")
	return &ffcli.Command{
		Name:       "delete",
		ShortUsage: "hostctl secret delete NAME",
		ShortHelp:  "delete a stored credential (leases already staged stay valid until used or expired)",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			name, err := oneName(fs, args, "secret delete")
			if err != nil {
				return err
			}
			c, err := g.client(daemon.NameSecretd)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := secretdapi.NewClient(c).CredentialDelete(ctx, name); err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, map[string]string{"deleted": name})
			}
			_, err = fmt.Fprintf(g.stdout, "deleted %s\n", name)
			return err
		},
	}
}

// msTime formats Unix milliseconds as RFC 3339 UTC, "-" for zero.
func msTime(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}
