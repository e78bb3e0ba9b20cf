package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// fakeClock advances only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newBar(w *bytes.Buffer) (*Bar, *fakeClock) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	b := &Bar{w: w, label: "sweep", total: 20, Now: c.now}
	b.start = c.now()
	return b, c
}

func TestRender(t *testing.T) {
	got := Render("sweep", 9, 20, 0, 90*time.Second, "rate=2")
	want := "sweep [#############.................]  45% 9/20 eta 1m50s rate=2"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if got := Render("x", 0, 4, 0, time.Second, ""); got != "x [..............................]   0% 0/4 eta ?" {
		t.Fatalf("no unit yet: %q", got)
	}
	if got := Render("x", 4, 4, 0, time.Second, ""); !strings.Contains(got, "100% 4/4 eta 0s") {
		t.Fatalf("done: %q", got)
	}
	if got := Render("sim", 7, 0, 0, time.Second, "t=2.0h"); got != "sim 7 done t=2.0h" {
		t.Fatalf("unknown total: %q", got)
	}
	// Resumed: 10 done before, 2 since in 60s: 8 left at 30s each.
	if got := Render("x", 12, 20, 10, time.Minute, ""); !strings.Contains(got, " 60% 12/20 eta 4m0s") {
		t.Fatalf("resumed: %q", got)
	}
}

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0s", 45 * time.Second: "45s", 200 * time.Second: "3m20s",
		5*time.Hour + 2*time.Minute + 9*time.Second: "5h2m", 51 * time.Hour: "2d3h", 1499 * time.Millisecond: "1s"} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestBar: redraws in place no more than every DefaultEvery (the total
// always), lines go above the bar, Done keeps or clears it, and the ETA
// follows the fake clock.
func TestBar(t *testing.T) {
	var w bytes.Buffer
	b, c := newBar(&w)
	c.add(10 * time.Second)
	b.Set(1, "")
	if got := w.String(); got != "\rsweep [#.............................]   5% 1/20 eta 3m10s\033[K" {
		t.Fatalf("first frame %q", got)
	}
	w.Reset()
	c.add(100 * time.Millisecond)
	b.Set(2, "")
	if w.Len() != 0 {
		t.Fatalf("redrawn within DefaultEvery: %q", w.String())
	}
	b.Line("run 2: ok")
	if got := w.String(); got != "\r\033[Krun 2: ok\n\rsweep [#.............................]   5% 1/20 eta 3m10s\033[K" {
		t.Fatalf("line %q", got)
	}
	w.Reset()
	c.add(10 * time.Second)
	b.Set(20, "")
	b.Done(true)
	if got := w.String(); got != "\rsweep [##############################] 100% 20/20 eta 0s\033[K\n" {
		t.Fatalf("last frame %q", got)
	}
	var nilBar *Bar
	nilBar.Set(1, "")
	nilBar.Line("x")
	nilBar.Done(false)
	nilBar.Resume(3)
	if NewIf(&w, false, "x", 1) != nil {
		t.Fatal("a buffer is no terminal")
	}
	if NewIf(&w, true, "x", 1) == nil {
		t.Fatal("forced bar missing")
	}
}
