package wire

import (
	"reflect"
	"sync"
)

// planCache memoizes per-type plans (the compiled decoders and encoders of
// fastdec.go and fastenc.go). A nil plan is cached too: that type takes
// the general path. build fills building with the plans of nested types,
// which are published together once the outer plan is complete.
type planCache[P any] struct {
	m     sync.Map // reflect.Type -> *P
	mu    sync.Mutex
	build func(t reflect.Type, building map[reflect.Type]*P) *P
}

func (c *planCache[P]) get(t reflect.Type) *P {
	if p, ok := c.m.Load(t); ok {
		return p.(*P)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	building := map[reflect.Type]*P{}
	p := c.build(t, building)
	if p != nil {
		for bt, bp := range building {
			c.m.Store(bt, bp)
		}
	}
	c.m.Store(t, p)
	return p
}

// implementsAny reports whether t or *t implements one of ifaces.
func implementsAny(t reflect.Type, ifaces ...reflect.Type) bool {
	for _, it := range ifaces {
		if t.Implements(it) || reflect.PointerTo(t).Implements(it) {
			return true
		}
	}
	return false
}
