package netns

import (
	"sort"
	"sync"
	"time"
)

// MaxRefusalKeys bounds the distinct (reason, shape) pairs one report
// holds; refusals past it are counted under their reason with shape "*",
// so a report stays small however many names an agent makes up.
const MaxRefusalKeys = 16

// Reasons a query is refused (RefusalCount.Reason).
const (
	RefusedPolicy    = "policy"          // no allowed origin or credential destination covers the name
	RefusedClass     = "class"           // a class other than IN
	RefusedExhausted = "names_exhausted" // the instance already holds -synthetic-names names
)

// RefusalCount is how often names of one shape were refused for one
// reason within a report.
type RefusalCount struct {
	Reason string `json:"reason"` // RefusedPolicy, RefusedClass or RefusedExhausted
	Shape  string `json:"shape"`  // the name's Shape; "*" for those past MaxRefusalKeys
	Count  uint64 `json:"count"`  // >= 1
}

// RefusalReport is what the resolver refused between two Takes: the
// holder writes each non-empty one to the instance directory and
// supervisord audits it (docs/supervisord.md, "Egress").
type RefusalReport struct {
	Since    int64          `json:"since"`    // Unix ms of the first refusal counted
	Until    int64          `json:"until"`    // Unix ms of the last
	Count    uint64         `json:"count"`    // refusals in all (the sum of Refusals' counts)
	Refusals []RefusalCount `json:"refusals"` // by reason, then shape; at most MaxRefusalKeys + 3 entries
}

// Refusals counts a resolver's refusals until they are taken. Safe for
// concurrent use.
type Refusals struct {
	mu     sync.Mutex
	counts map[[2]string]uint64
	since  time.Time
	until  time.Time
	total  uint64
}

// add counts one refusal of a name of shape for reason.
func (r *Refusals) add(reason, shape string) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		r.counts = map[[2]string]uint64{}
	}
	k := [2]string{reason, shape}
	if _, ok := r.counts[k]; !ok && len(r.counts) >= MaxRefusalKeys {
		k[1] = "*"
	}
	r.counts[k]++
	if r.total == 0 {
		r.since = now
	}
	r.until = now
	r.total++
}

// Take returns the refusals counted since the last Take and starts
// counting anew; ok is false when there were none.
func (r *Refusals) Take() (rep RefusalReport, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.total == 0 {
		return RefusalReport{}, false
	}
	rep = RefusalReport{Since: r.since.UnixMilli(), Until: r.until.UnixMilli(), Count: r.total}
	for k, n := range r.counts {
		rep.Refusals = append(rep.Refusals, RefusalCount{Reason: k[0], Shape: k[1], Count: n})
	}
	sort.Slice(rep.Refusals, func(i, j int) bool {
		a, b := rep.Refusals[i], rep.Refusals[j]
		if a.Reason != b.Reason {
			return a.Reason < b.Reason
		}
		return a.Shape < b.Shape
	})
	clear(r.counts)
	r.total = 0
	return rep, true
}
