//go:build !faultinject

package fault

// Point marks the step boundary name. In a build without the tag
// faultinject it does nothing (and is compiled away).
func Point(name string) {}
