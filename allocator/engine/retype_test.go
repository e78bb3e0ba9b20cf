package engine

import (
	"maps"
	"slices"
	"testing"
)

// A unit's baselines and deficits follow the cluster's types: a type
// that leaves drops its baseline and keeps its deficit until it comes
// back (as the maps by type name did), and History's maps round-trip.
func TestUnitRetype(t *testing.T) {
	e := &Engine{typesGen: 1}
	u := &unit{}
	u.retype([]string{"k80", "v100"}, e.typesGen+1) // the current types
	copy(u.baseV, []float64{10, 20})
	copy(u.defV, []float64{-3, 4})
	if got := e.deficit(u, "k80", 0); got != -3 {
		t.Fatalf("deficit k80 %v", got)
	}
	if got := e.baseline(u, "v100", 1); got != 20 {
		t.Fatalf("baseline v100 %v", got)
	}
	// k80 leaves.
	u.retype([]string{"v100"}, 3)
	e.typesGen = 2
	if got := e.baseline(u, "k80", -1); got != 0 {
		t.Errorf("baseline of a type gone %v, want 0", got)
	}
	if got := e.deficit(u, "k80", -1); got != -3 {
		t.Errorf("deficit of a type gone %v, want -3 kept", got)
	}
	if got := e.deficit(u, "v100", 0); got != 4 {
		t.Errorf("deficit v100 %v", got)
	}
	if want := map[string]float64{"v100": 20}; !maps.Equal(u.baseMap(), want) {
		t.Errorf("baseMap %v, want %v", u.baseMap(), want)
	}
	if want := map[string]float64{"k80": -3, "v100": 4}; !maps.Equal(u.defMap(), want) {
		t.Errorf("defMap %v, want %v", u.defMap(), want)
	}
	// Read by name while the engine's types are others (a restored unit).
	e.typesGen = 7
	if got := e.deficit(u, "v100", 0); got != 4 {
		t.Errorf("deficit v100 by name %v", got)
	}
	// k80 comes back with a p100: its deficit returns, baseline 0.
	u.retype([]string{"k80", "p100", "v100"}, 8)
	if len(u.defOld) != 0 {
		t.Errorf("defOld %v after the type came back", u.defOld)
	}
	if want := []float64{-3, 0, 4}; !slices.Equal(u.defV, want) {
		t.Errorf("defV %v, want %v", u.defV, want)
	}
	if want := []float64{0, 0, 20}; !slices.Equal(u.baseV, want) {
		t.Errorf("baseV %v, want %v", u.baseV, want)
	}
	// History's maps set back.
	r := &unit{}
	r.setBaseDef(map[string]float64{"v100": 20}, map[string]float64{"k80": -3, "v100": 4})
	if !maps.Equal(r.baseMap(), map[string]float64{"v100": 20}) || !maps.Equal(r.defMap(), map[string]float64{"k80": -3, "v100": 4}) {
		t.Errorf("restored %v %v", r.baseMap(), r.defMap())
	}
	if got := e.deficit(r, "k80", 0); got != -3 {
		t.Errorf("restored deficit k80 %v", got)
	}
	var empty unit
	if empty.baseMap() != nil || empty.defMap() != nil {
		t.Errorf("a unit never reset has maps")
	}
}
