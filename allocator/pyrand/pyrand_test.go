package pyrand

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"
)

// testdata/cpython.json is written by testdata/gen.py with CPython.
type cpythonCase struct {
	Seed        int64       `json:"seed"`
	Uint32      []uint32    `json:"uint32"`
	Random      []string    `json:"random"`
	GetRandBits [][2]uint64 `json:"getrandbits"`
	RandBelow   [][2]uint64 `json:"randbelow"`
	Choice26    []int       `json:"choice26"`
	Shuffle10   []int       `json:"shuffle10"`
	Uniform     []string    `json:"uniform"`
	After5000   string      `json:"after5000"`
}

func parse(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMatchesCPython(t *testing.T) {
	b, err := os.ReadFile("testdata/cpython.json")
	if err != nil {
		t.Fatal(err)
	}
	var data struct {
		Cases []cpythonCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &data); err != nil {
		t.Fatal(err)
	}
	if len(data.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range data.Cases {
		r := New(c.Seed)
		for i, want := range c.Uint32 {
			if got := uint32(r.GetRandBits(32)); got != want {
				t.Fatalf("seed %d: getrandbits(32) #%d = %d, want %d", c.Seed, i, got, want)
			}
		}
		for i, s := range c.Random {
			if got, want := r.Random(), parse(t, s); got != want {
				t.Fatalf("seed %d: random() #%d = %v, want %v", c.Seed, i, got, want)
			}
		}
		for _, kv := range c.GetRandBits {
			if got := r.GetRandBits(int(kv[0])); got != kv[1] {
				t.Fatalf("seed %d: getrandbits(%d) = %d, want %d", c.Seed, kv[0], got, kv[1])
			}
		}
		for _, nv := range c.RandBelow {
			if got := r.RandBelow(nv[0]); got != nv[1] {
				t.Fatalf("seed %d: randrange(%d) = %d, want %d", c.Seed, nv[0], got, nv[1])
			}
		}
		for i, want := range c.Choice26 {
			if got := r.Choice(26); got != want {
				t.Fatalf("seed %d: choice #%d = %d, want %d", c.Seed, i, got, want)
			}
		}
		seq := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
		r.Shuffle(len(seq), func(i, j int) { seq[i], seq[j] = seq[j], seq[i] })
		for i := range seq {
			if seq[i] != c.Shuffle10[i] {
				t.Fatalf("seed %d: shuffle = %v, want %v", c.Seed, seq, c.Shuffle10)
			}
		}
		for i, s := range c.Uniform {
			if got, want := r.Uniform(1.5, 3), parse(t, s); got != want {
				t.Fatalf("seed %d: uniform #%d = %v, want %v", c.Seed, i, got, want)
			}
		}
		for range 5000 {
			r.Random()
		}
		if got, want := r.Random(), parse(t, c.After5000); got != want {
			t.Fatalf("seed %d: random() after 5000 = %v, want %v", c.Seed, got, want)
		}
	}
}

func TestRandRange(t *testing.T) {
	r := New(7)
	for range 1000 {
		v := r.RandRange(-3, 4)
		if v < -3 || v >= 4 {
			t.Fatal(v)
		}
	}
}
