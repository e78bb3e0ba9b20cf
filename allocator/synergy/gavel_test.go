package synergy_test

import (
	"testing"

	"github.com/rondo-sched/rondo/allocator/synergy"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	"github.com/rondo-sched/rondo/allocator/trace"
)

// TestForGavelModel: every model of Gavel's job table (trace.Templates)
// and of its throughput table maps to a profile the embedded table
// resolves at 1, 2, 4 and 8 GPUs; the mapping is the documented one.
func TestForGavelModel(t *testing.T) {
	want := map[string]string{
		"ResNet-18 (batch size 64)":        "res18",
		"ResNet-50 (batch size 128)":       "res50",
		"Transformer (batch size 16)":      "transformer",
		"LM (batch size 80)":               "lstm",
		"Recommendation (batch size 8192)": "vae",
		"A3C":                              "res18",
		"CycleGAN":                         "res50",
		"res18":                            "", // not a Gavel model
		"ResNet-101 (batch size 64)":       "",
		"":                                 "",
	}
	for model, w := range want {
		if got := synergy.ForGavelModel(model); got != w {
			t.Errorf("ForGavelModel(%q) = %q, want %q", model, got, w)
		}
	}
	models := map[string]bool{}
	for _, tm := range trace.Templates {
		models[tm.Model] = true
	}
	tb := throughputs.Default()
	for _, typ := range tb.Types() {
		for _, k := range tb.Keys(typ) {
			models[k.Model] = true
		}
	}
	if len(models) < 26 {
		t.Fatalf("%d Gavel models, want the 26 templates at least", len(models))
	}
	for m := range models {
		name := synergy.ForGavelModel(m)
		if name == "" {
			t.Errorf("Gavel model %q has no profile", m)
			continue
		}
		for _, g := range []int{1, 2, 4, 8} {
			if _, err := synergy.Default().Lookup(name, g, synergy.BaseCoresPerGPU); err != nil {
				t.Errorf("%q → %q at %d GPUs: %v", m, name, g, err)
			}
		}
	}
}
