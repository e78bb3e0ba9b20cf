package engine

import (
	"reflect"
	"unsafe"
)

// mapID is a map's identity: maps shared between pairs (the simulator's
// one per model pair) have the same id, so per-map work is done once.
func mapID(m map[string][2]float64) unsafe.Pointer {
	return reflect.ValueOf(m).UnsafePointer()
}

// pairMaps memoizes per-map work by mapID.
type pairMaps map[unsafe.Pointer]map[string][2]float64
