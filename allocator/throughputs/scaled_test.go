package throughputs

import (
	"math"
	"testing"
)

func TestScaled(t *testing.T) {
	tb := Default()
	m := "ResNet-50 (batch size 64)"
	for _, n := range []int{1, 2, 4, 8} {
		want, ok := tb.Lookup(m, n, "v100")
		got, ok2 := tb.Scaled(m, n, "v100")
		if !ok || !ok2 || got != want {
			t.Fatalf("%d GPUs: Scaled %v, table %v", n, got, want)
		}
	}
	// 3 GPUs: not measured, linear from 2 GPUs' measured per-GPU rate.
	t2, _ := tb.Lookup(m, 2, "v100")
	got, ok := tb.Scaled(m, 3, "v100")
	if !ok || math.Abs(got-t2*1.5) > 1e-9 {
		t.Fatalf("3 GPUs: %v, want %v", got, t2*1.5)
	}
	// 12 GPUs: linear from 8.
	t8, _ := tb.Lookup(m, 8, "v100")
	if got, _ := tb.Scaled(m, 12, "v100"); math.Abs(got-t8*1.5) > 1e-9 {
		t.Fatalf("12 GPUs: %v, want %v", got, t8*1.5)
	}
	if _, ok := tb.Scaled("no such model", 2, "v100"); ok {
		t.Fatal("unknown model scaled")
	}
	if _, ok := tb.Scaled(m, 0, "v100"); ok {
		t.Fatal("0 GPUs scaled")
	}
}
