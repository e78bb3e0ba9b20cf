package dl2

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand"
	"testing"
)

// goldenModel is the checksum of the shipped model the golden decisions
// were recorded with; goldenDecisions hashes its decisions on 3000 random
// states (greedy, and sampling with exploration). `make dl2-model`
// retrains the shipped model deterministically; a new one changes both
// values (the skip message prints them: record them here).
const (
	goldenModel     = "e19feb5c0f54a6f78613a04f09ec49ee8b5cf2b30c0df40eb51ec3a0792da355"
	goldenDecisions = "1da5f7e60c73ab2473416f4808660e224854eb7829adb6f01acd4d9712b1ebaf"
)

// TestShippedModelDecidesAsBefore: the shipped (perjob) model decides
// exactly as recorded: a change to the slot, the encoding, the networks'
// inference or the model file that changes a decision fails here.
func TestShippedModelDecidesAsBefore(t *testing.T) {
	m, err := DefaultModel()
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	r := rand.New(rand.NewSource(11))
	greedy := NewPolicy(m, t.Logf)
	sampling := NewPolicy(m, t.Logf)
	sampling.Rand = rand.New(rand.NewSource(12))
	sampling.Explore = &Exploration{Epsilon: 0.2, Ratio: 3, Rand: sampling.Rand}
	for i := 0; i < 3000; i++ {
		servers, jobs := randomSlotJobs(r)
		p := greedy
		if i%2 == 1 {
			p = sampling
		}
		s := NewSlot(servers, jobs, Table1().Speed())
		p.Decide(s)
		for _, a := range s.Alloc {
			fmt.Fprintf(h, "%d %d %v %v;", a.Workers, a.PS, a.WorkerOn, a.PSOn)
		}
	}
	got := hex.EncodeToString(h.Sum(nil))
	if m.Checksum != goldenModel {
		t.Skipf("the shipped model changed (%s): decisions %s", m.Checksum, got)
	}
	if got != goldenDecisions {
		t.Fatalf("the shipped model's decisions changed: %s, want %s", got, goldenDecisions)
	}
}
