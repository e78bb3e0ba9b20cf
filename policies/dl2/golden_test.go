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
// states (greedy, and sampling with exploration). A retrained shipped
// model skips the test (record the new values with -v).
const (
	goldenModel     = "fd32c270b32abffd34a5d9a7012ae0b648664d8ff566959445a4b207193e818f"
	goldenDecisions = "e34f622ce5b5d066ce211c5c6d7a6099de4ba15b4149548291ac70b9b3c25fd5"
)

// TestShippedModelDecidesAsBefore: the shipped (MLP) model decides
// exactly as it did before the networks went behind an interface.
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
