package engine

import "unsafe"

// mapID is a map's identity (nil for a nil map): maps shared between pairs
// (the simulator's one per model pair) have the same id, so per-map work
// is done once; the same map handed on again is known unchanged without
// comparing it (unless written in place).
func mapID[V any](m map[string]V) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&m))
}

// pairMaps memoizes per-map work by mapID.
type pairMaps map[unsafe.Pointer]map[string][2]float64
