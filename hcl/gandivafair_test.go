package hcl

import (
	"reflect"
	"testing"
	"time"
)

// TestGandivaFairConfig: testdata/gandiva_fair.hcl's fields reach the VC,
// with DefaultTickets for a user block without tickets, and the other VC
// keeps the zero values.
func TestGandivaFairConfig(t *testing.T) {
	cfg, diags := LoadPath("testdata/gandiva_fair.hcl")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	v := cfg.VCs[0]
	if !v.GandivaFair() || !v.Trading || v.Quantum != 12*time.Minute || v.MaxMigrations != 4 || v.TradeMargin != 0.05 {
		t.Errorf("research = %+v", v)
	}
	var users []User
	for _, u := range v.Users {
		users = append(users, User{Name: u.Name, Tickets: u.Tickets})
	}
	if want := []User{{Name: "alice", Tickets: 200}, {Name: "bob", Tickets: DefaultTickets}}; !reflect.DeepEqual(users, want) {
		t.Errorf("users = %+v, want %+v", users, want)
	}
	if r := v.Users[1].Range; r.Filename != "testdata/gandiva_fair.hcl" || r.Start.Line != 15 {
		t.Errorf("bob's range = %v", r)
	}
	if len(v.Entities) != 0 {
		t.Errorf("entities = %+v", v.Entities)
	}
	round := time.Duration(cfg.RoundSeconds) * time.Second
	if n := v.QuantumRounds(round); n != 2 {
		t.Errorf("QuantumRounds = %d, want 2", n)
	}
	p := cfg.VCs[1]
	if p.GandivaFair() || p.Trading || p.Quantum != 0 || p.MaxMigrations != 0 || p.TradeMargin != 0 || p.Users != nil {
		t.Errorf("prod = %+v", p)
	}
	if n := p.QuantumRounds(round); n != 0 {
		t.Errorf("unset quantum: QuantumRounds = %d, want 0 (the caller's default)", n)
	}
	if DefaultTickets != 100 {
		t.Errorf("DefaultTickets = %d; policies/fairshare.DefaultTickets is 100", DefaultTickets)
	}
}

// TestGandivaFairDefaults: a bare gandiva_fair VC has every field unset.
func TestGandivaFairDefaults(t *testing.T) {
	cfg, diags := Parse(Source{Name: "f.hcl", Src: []byte("vc \"f\" {\n  policy = \"gandiva_fair\"\n}\n")})
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	v := cfg.VCs[0]
	if !v.GandivaFair() || v.Trading || v.Quantum != 0 || v.MaxMigrations != 0 || v.TradeMargin != 0 || v.Users != nil {
		t.Errorf("defaults = %+v", v)
	}
	if n := v.QuantumRounds(6 * time.Minute); n != 0 {
		t.Errorf("QuantumRounds = %d", n)
	}
}

// TestGandivaFairQuantumRounds: the quantum is checked against the round
// wherever round_seconds is declared (here a later file).
func TestGandivaFairQuantumRounds(t *testing.T) {
	vc := Source{Name: "a.hcl", Src: []byte("vc \"f\" {\n  policy  = \"gandiva_fair\"\n  quantum = \"15m\"\n}\n")}
	cfg, diags := Parse(vc, Source{Name: "b.hcl", Src: []byte("round_seconds = 300\n")})
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if n := cfg.VCs[0].QuantumRounds(300 * time.Second); n != 3 {
		t.Errorf("QuantumRounds = %d, want 3", n)
	}
	cfg, diags = Parse(vc, Source{Name: "b.hcl", Src: []byte("round_seconds = 180\n")})
	if diags.HasErrors() || cfg.VCs[0].QuantumRounds(3*time.Minute) != 5 {
		t.Errorf("round 3m: %s", FormatDiagnostics(diags))
	}
	cfg, diags = Parse(vc, Source{Name: "b.hcl", Src: []byte("round_seconds = 360\n")})
	want := `a.hcl:3:13: Invalid quantum; vc "f": quantum: 15m is not a whole number of rounds (round 6m)`
	if cfg != nil || len(diags) != 1 || FormatDiagnostic(diags[0]) != want {
		t.Errorf("round 6m: config %v, %q\nwant %q", cfg != nil, FormatDiagnostics(diags), want)
	}
}

// TestGandivaFairErrors: each bad input is exactly one error, at
// file:line:col, naming the field; no config comes back.
func TestGandivaFairErrors(t *testing.T) {
	fair := func(body string) string { return "vc \"f\" {\n  policy = \"gandiva_fair\"\n" + body + "}\n" }
	other := func(body string) string { return "vc \"f\" {\n  policy = \"fifo\"\n" + body + "}\n" }
	for _, c := range []struct{ src, want string }{
		// Only a gandiva_fair VC.
		{other("  trading = true\n"), `f.hcl:3:3: Not a gandiva_fair VC; vc "f": trading: only a gandiva_fair VC trades (policy is "fifo")`},
		{other("  quantum = \"6m\"\n"), `f.hcl:3:3: Not a gandiva_fair VC; vc "f": quantum: only a gandiva_fair VC has a quantum (policy is "fifo")`},
		{other("  max_migrations = 2\n"), `f.hcl:3:3: Not a gandiva_fair VC; vc "f": max_migrations: only a gandiva_fair VC bounds migrations (policy is "fifo")`},
		{other("  trade_margin = 0.1\n"), `f.hcl:3:3: Not a gandiva_fair VC; vc "f": trade_margin: only a gandiva_fair VC trades (policy is "fifo")`},
		{other("  user \"alice\" { tickets = 2 }\n"), `f.hcl:3:3: Not a gandiva_fair VC; vc "f": user "alice": only a gandiva_fair VC has users with tickets (policy is "fifo")`},
		{"vc \"f\" {\n  trading = true\n}\n", `f.hcl:2:3: Not a gandiva_fair VC; vc "f": trading: only a gandiva_fair VC trades (policy is "max_min_fairness_perf")`},
		// A bad policy is the only error.
		{"vc \"f\" {\n  policy  = \"gandiva_fare\"\n  trading = true\n}\n", `f.hcl:2:13: Unknown VC policy; vc "f": policy unknown policy "gandiva_fare"`},
		// Entities.
		{fair("  entity \"team-a\" { weight = 2 }\n"), `f.hcl:3:3: Entity in a gandiva_fair VC; vc "f": entity: a gandiva_fair VC's users are its entities; declare user blocks`},
		// trading.
		{fair("  trading = \"yes\"\n"), `f.hcl:3:13: Invalid value for trading; trading must be a bool`},
		// quantum.
		{fair("  quantum = \"six\"\n"), `f.hcl:3:13: Invalid quantum; vc "f": quantum: "six" is not a duration (e.g. "6m")`},
		{fair("  quantum = 360\n"), `f.hcl:3:13: Invalid quantum; vc "f": quantum: "360" is not a duration (e.g. "6m")`},
		{fair("  quantum = \"0s\"\n"), `f.hcl:3:13: Invalid quantum; vc "f": quantum: 0s must be positive`},
		{fair("  quantum = \"-6m\"\n"), `f.hcl:3:13: Invalid quantum; vc "f": quantum: -6m must be positive`},
		{fair("  quantum = \"5m\"\n"), `f.hcl:3:13: Invalid quantum; vc "f": quantum: 5m is not a whole number of rounds (round 6m)`},
		{fair("  quantum = \"3m\"\n"), `f.hcl:3:13: Invalid quantum; vc "f": quantum: 3m is not a whole number of rounds (round 6m)`},
		// max_migrations, trade_margin.
		{fair("  max_migrations = -1\n"), `f.hcl:3:20: Invalid max_migrations; vc "f": max_migrations: must be a whole number >= 0, got -1`},
		{fair("  max_migrations = 1.5\n"), `f.hcl:3:20: Invalid max_migrations; vc "f": max_migrations: must be a whole number >= 0, got 1.5`},
		{fair("  max_migrations = \"2\"\n"), `f.hcl:3:20: Invalid max_migrations; vc "f": max_migrations: must be a whole number >= 0, got "2", a string`},
		{fair("  trade_margin = -0.05\n"), `f.hcl:3:18: Invalid trade_margin; vc "f": trade_margin: must be a number >= 0, got -0.05`},
		{fair("  trade_margin = 1e400\n"), `f.hcl:3:18: Invalid trade_margin; vc "f": trade_margin: must be a number >= 0, got +Inf`},
		// users.
		{fair("  user \"alice\" { tickets = 2.5 }\n"), `f.hcl:3:28: Invalid tickets; vc "f": user "alice": tickets: must be a positive integer, got 2.5`},
		{fair("  user \"alice\" { tickets = 0 }\n"), `f.hcl:3:28: Invalid tickets; vc "f": user "alice": tickets: must be a positive integer, got 0`},
		{fair("  user \"alice\" { tickets = -3 }\n"), `f.hcl:3:28: Invalid tickets; vc "f": user "alice": tickets: must be a positive integer, got -3`},
		{fair("  user \"alice\" { tickets = \"200\" }\n"), `f.hcl:3:28: Invalid tickets; vc "f": user "alice": tickets: must be a positive integer, got "200", a string`},
		{fair("  user \"alice\" { tickets = true }\n"), `f.hcl:3:28: Invalid tickets; vc "f": user "alice": tickets: must be a positive integer, got a bool`},
		{fair("  user \"alice\" { tickets = 200 }\n  user \"bob\" {}\n  user \"alice\" {}\n"),
			`f.hcl:5:3: Duplicate name; vc "f": user "alice": declared twice (first at f.hcl:3:3)`},
		{fair("  user \"\" { tickets = 200 }\n"), `f.hcl:3:3: Invalid user; vc "f": user "": the name must not be empty`},
	} {
		wantOneError(t, c.src, c.want)
	}
}

// TestGandivaFairFiles: the malformed testdata files, one check each.
func TestGandivaFairFiles(t *testing.T) {
	for file, want := range map[string]string{
		"gandiva_fair_quantum.hcl":        `testdata/gandiva_fair_quantum.hcl:4:13: Invalid quantum; vc "research": quantum: 5m is not a whole number of rounds (round 6m)`,
		"gandiva_fair_entity.hcl":         `testdata/gandiva_fair_entity.hcl:4:3: Entity in a gandiva_fair VC; vc "research": entity: a gandiva_fair VC's users are its entities; declare user blocks`,
		"gandiva_fair_trading.hcl":        `testdata/gandiva_fair_trading.hcl:3:3: Not a gandiva_fair VC; vc "research": trading: only a gandiva_fair VC trades (policy is "fifo")`,
		"gandiva_fair_duplicate_user.hcl": `testdata/gandiva_fair_duplicate_user.hcl:5:3: Duplicate name; vc "research": user "alice": declared twice (first at testdata/gandiva_fair_duplicate_user.hcl:3:3)`,
	} {
		cfg, diags := LoadPath("testdata/" + file)
		if cfg != nil || len(diags) != 1 || FormatDiagnostic(diags[0]) != want {
			t.Errorf("%s: config %v, %q\nwant %q", file, cfg != nil, FormatDiagnostics(diags), want)
		}
	}
}

// TestShortDuration: durations print as configs write them.
func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		6 * time.Minute: "6m", 90 * time.Minute: "1h30m", time.Hour: "1h", 90 * time.Second: "1m30s", 45 * time.Second: "45s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
