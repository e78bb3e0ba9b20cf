package engine

import (
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"testing"
)

// TestNoteEventsDelta: the job set kept between rounds (lastJobs) and the
// recompute flag follow the snapshots whatever they do to the list: jobs
// arriving and leaving in a stable order (jobsDelta's walk), reorderings
// and duplicates (the full rebuild), and the same list again.
func TestNoteEventsDelta(t *testing.T) {
	e, err := New(Config{Policy: "max_min_fairness_perf", RoundS: 360})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	var ids []string
	next := 0
	prev := map[string]bool{}
	for round := 0; round < 3000; round++ {
		switch r := rng.Intn(10); {
		case r < 3: // arrivals at the end
			for n := rng.Intn(3) + 1; n > 0; n-- {
				ids = append(ids, fmt.Sprintf("j%d", next))
				next++
			}
		case r < 5 && len(ids) > 0: // departures anywhere
			for n := rng.Intn(3) + 1; n > 0 && len(ids) > 0; n-- {
				i := rng.Intn(len(ids))
				ids = append(ids[:i:i], ids[i+1:]...)
			}
		case r == 5 && len(ids) > 1: // two jobs swap places
			i, j := rng.Intn(len(ids)), rng.Intn(len(ids))
			ids[i], ids[j] = ids[j], ids[i]
		case r == 6 && len(ids) > 0: // an arrival in the middle and a departure
			i := rng.Intn(len(ids))
			ids = append(ids[:i:i], append([]string{fmt.Sprintf("j%d", next)}, ids[i+1:]...)...)
			next++
		}
		list := ids
		if rng.Intn(50) == 0 && len(ids) > 0 { // a duplicate, this round only
			list = append(append([]string(nil), ids...), ids[rng.Intn(len(ids))])
		}
		s := &Snapshot{}
		now := map[string]bool{}
		for _, id := range list {
			s.Jobs = append(s.Jobs, Job{ID: id})
			now[id] = true
		}
		e.needUpdate = false
		e.noteEvents(s)
		if !maps.Equal(e.lastJobs, now) {
			t.Fatalf("round %d: kept set %v, want %v", round, e.lastJobs, now)
		}
		if changed := !maps.Equal(now, prev); e.needUpdate != changed {
			t.Fatalf("round %d: recompute %v, set changed %v", round, e.needUpdate, changed)
		}
		prev = now
	}
}

// TestRankedLazySort: candidates popped from the lazily sorted ranked
// buffer come in the full sort's order, ties included, and sortAll leaves
// the whole sorted order in place.
func TestRankedLazySort(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for trial := 0; trial < 200; trial++ {
		n := rng.Intn(300)
		var all []candidate
		for i := 0; i < n; i++ {
			// Few distinct values: many ties on priority and deficit.
			all = append(all, candidate{priority: float64(rng.Intn(5)), deficit: float64(rng.Intn(3)),
				x: float64(rng.Intn(2)), ord: rng.Intn(1000000)*1000 + i})
		}
		want := slices.Clone(all)
		slices.SortFunc(want, func(a, b candidate) int { return byRank(&a, &b) })
		cb := &candBuf{heap: slices.Clone(all), ranked: make([]candidate, 0, n)}
		heapify(cb.heap)
		stop := rng.Intn(n + 1)
		for i := 0; i < stop; i++ {
			if c := cb.rankedAt(i); *c != want[i] {
				t.Fatalf("trial %d: position %d: %+v, want %+v", trial, i, *c, want[i])
			}
		}
		if rng.Intn(2) == 0 {
			cb.sortAll()
			if !slices.Equal(cb.ranked, want) || len(cb.heap) != 0 {
				t.Fatalf("trial %d: sortAll left %d sorted, %d in the heap", trial, len(cb.ranked), len(cb.heap))
			}
		}
		if cb.rankedAt(n) != nil {
			t.Fatalf("trial %d: a candidate past the last", trial)
		}
	}
}
