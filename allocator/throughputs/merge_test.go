package throughputs

import "testing"

func TestOver(t *testing.T) {
	op, err := Parse([]byte(`{
	  "h100-80gb": {"('ResNet-50 (batch size 64)', 1)": {"null": 900}},
	  "v100": {"('ResNet-50 (batch size 64)', 1)": {"null": 123}}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	base := Default()
	m := op.Over(base)
	if v, ok := m.Lookup("ResNet-50 (batch size 64)", 1, "h100-80gb"); !ok || v != 900 {
		t.Errorf("new type: %v %v", v, ok)
	}
	if v, _ := m.Lookup("ResNet-50 (batch size 64)", 1, "v100"); v != 123 {
		t.Errorf("the operator's value wins: %v", v)
	}
	// What the file does not say keeps Gavel's values, and Gavel's table is unchanged.
	gv, _ := base.Lookup("ResNet-50 (batch size 64)", 1, "v100")
	kv, _ := base.Lookup("ResNet-50 (batch size 64)", 1, "k80")
	if v, ok := m.Lookup("ResNet-50 (batch size 64)", 1, "k80"); !ok || v != kv {
		t.Errorf("k80 = %v, want Gavel's %v", v, kv)
	}
	if gv == 123 || len(m.Keys("v100")) != len(base.Keys("v100")) {
		t.Errorf("base changed or v100 keys lost: %v, %d vs %d", gv, len(m.Keys("v100")), len(base.Keys("v100")))
	}
	if !m.Added("h100-80gb") || m.Added("v100") || base.Added("h100-80gb") {
		t.Errorf("Added: h100 %v, v100 %v, base %v", m.Added("h100-80gb"), m.Added("v100"), base.Added("h100-80gb"))
	}
	if _, ok := base.Lookup("ResNet-50 (batch size 64)", 1, "h100-80gb"); ok {
		t.Error("Default() gained the operator's type")
	}
}
