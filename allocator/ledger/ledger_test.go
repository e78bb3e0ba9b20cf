package ledger

import "testing"

func TestLedger(t *testing.T) {
	l := New()
	acct := l.Job("a")
	l.Credit("a", "v100", 10)
	l.Credit("a", "v100", 5)
	l.Credit("a", "k80", 1)
	if acct["v100"] != 15 || acct["k80"] != 1 {
		t.Errorf("live account %v", acct)
	}
	if l.Pair("a+b") != nil {
		t.Errorf("a pair that never ran has an account")
	}
	if !l.CreditPair("a+b", "v100", 3) || l.CreditPair("a+b", "v100", 4) || l.Pair("a+b")["v100"] != 7 {
		t.Errorf("pair account %v", l.Pair("a+b"))
	}
	// A pair's run is not the jobs' own.
	if acct["v100"] != 15 {
		t.Errorf("pair credited to its job: %v", acct)
	}
	l.Restore("a", map[string]float64{"p100": 2})
	if len(acct) != 1 || acct["p100"] != 2 {
		t.Errorf("restored %v", acct)
	}
	l.Forget("a")
	l.ForgetPair("a+b")
	if len(l.Job("a")) != 0 || l.Pair("a+b") != nil {
		t.Errorf("forgotten accounts remain")
	}
}
