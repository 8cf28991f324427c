package provider

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"hostkit.dev/cmd/containerization-helper/internal/codec"
	"hostkit.dev/lib/wire"
)

// List returns every container under the root, sorted by id; empty is a
// non-nil empty slice. Where the codec decodes the runtime's own records
// (runc 1.1), List reads them (storedList: what `runc list` reads, without
// a process; 100 containers cost a few milliseconds instead of one runtime
// run that spends ~1 ms per container) and runs `list` only when one of
// them is not certain. runc's list carries annotations. crun 1.8's does
// not: for each entry they come from the runtime's own record of the
// config it created the container from (<root>/<id>/config.json, the file
// `crun state` reads them from, decoded strictly by the crun-1.8 codec),
// not from the bundle's config.json, which can change or disappear after
// create, and not by running `state` once per container (100 containers
// would cost 100 runtime processes; see BenchmarkList). An entry whose
// record is missing is re-read with `state`, and left out if it is gone.
// An entry whose id is not a valid id is kept without annotations (it is
// not the helper's to touch). Errors: CodeDecode, CodeFailed, procexec's.
func (p *cli) List(ctx context.Context) ([]State, error) {
	c, err := p.negotiated(ctx)
	if err != nil {
		return nil, err
	}
	if out, ok := p.storedList(c); ok {
		for _, st := range out {
			p.remember(st)
		}
		return out, nil
	}
	res, msg, err := p.run(ctx, verbList, nil, []string{"--format", "json"})
	if exitedNonzero(err) {
		return nil, p.failure(verbList, "", msg, err)
	}
	if err != nil {
		return nil, err
	}
	entries, err := c.List(res.Stdout)
	if err != nil {
		return nil, err
	}
	out := make([]State, 0, len(entries))
	for _, e := range entries {
		st := fromCodec(e)
		if !c.Features().ListAnnotations && ValidID(st.ID) {
			gone, err := p.storedAnnotations(ctx, c, &st)
			if err != nil {
				return nil, err
			}
			if gone {
				continue
			}
		}
		p.remember(st)
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b State) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// storedAnnotations fills st.Annotations from the runtime's stored config;
// gone reports a container deleted since the list.
func (p *cli) storedAnnotations(ctx context.Context, c codec.Codec, st *State) (gone bool, err error) {
	b, err := readRegular(filepath.Join(p.root, st.ID, c.Features().StoredConfig), codec.MaxState)
	if errors.Is(err, fs.ErrNotExist) {
		full, err := p.State(ctx, st.ID)
		if wire.HasCode(err, CodeNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		*st = *full
		return false, nil
	}
	if err != nil {
		return false, wire.Wrap(CodeFailed, p.name+" list: cannot read the stored config of "+st.ID, err)
	}
	st.Annotations, err = c.StoredAnnotations(b)
	return false, err
}
