// Package progress draws a one-line progress bar with percent and ETA for
// Rondo's long commands (simulate, sweeps, DL2 training), on stderr when
// it is a terminal (Enabled), never on stdout; and formats the ETA the
// trainer prints in its log lines.
//
// A nil *Bar is a valid, silent bar, so callers build one only when the
// bar is wanted and call its methods unconditionally.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
)

// Width is the bar's width in cells.
const Width = 30

// DefaultEvery is the least time between two redraws.
const DefaultEvery = 200 * time.Millisecond

// Bar is a progress bar on one line of W, redrawn in place with '\r'.
type Bar struct {
	w     io.Writer
	label string
	total int
	// Now is the clock (default time.Now); Every the least time between
	// redraws (default DefaultEvery; the last unit always draws).
	Now   func() time.Time
	Every time.Duration

	mu       sync.Mutex
	start    time.Time
	base     int // units done before start: in the percent, not the rate
	cur      int
	note     string
	last     string
	lastDraw time.Time
	drawn    bool
}

// New makes a bar of total units on w, labelled label, its clock started.
func New(w io.Writer, label string, total int) *Bar {
	b := &Bar{w: w, label: label, total: total, Now: time.Now}
	b.start = b.Now()
	return b
}

// Enabled reports whether a bar belongs on w: force (a -progress flag), or
// w is a terminal.
func Enabled(w io.Writer, force bool) bool {
	if force {
		return true
	}
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// NewIf is New when Enabled(w, force), else nil (a silent bar).
func NewIf(w io.Writer, force bool, label string, total int) *Bar {
	if !Enabled(w, force) {
		return nil
	}
	return New(w, label, total)
}

// Resume says done units were finished before this run (a resumed sweep):
// they count in the percent, not in the rate the ETA is measured from. It
// restarts the clock.
func (b *Bar) Resume(done int) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.base, b.cur = done, done
	b.start = b.Now()
}

// Set moves the bar to cur units with a note after it; it redraws at most
// every Every, and always at the total.
func (b *Bar) Set(cur int, note string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cur, b.note = cur, note
	now := b.Now()
	every := b.Every
	if every == 0 {
		every = DefaultEvery
	}
	if b.drawn && (cur < b.total || b.total <= 0) && now.Sub(b.lastDraw) < every {
		return
	}
	b.lastDraw, b.drawn = now, true
	b.last = Render(b.label, cur, b.total, b.base, now.Sub(b.start), note)
	fmt.Fprintf(b.w, "\r%s\033[K", b.last)
}

// Line prints s on its own line above the bar, which is redrawn under it.
func (b *Bar) Line(s string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last != "" {
		fmt.Fprint(b.w, "\r\033[K")
	}
	fmt.Fprintln(b.w, s)
	if b.last != "" {
		fmt.Fprintf(b.w, "\r%s\033[K", b.last)
	}
}

// Done ends the bar: the line is kept (finished with a newline) when keep,
// else cleared.
func (b *Bar) Done(keep bool) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last == "" {
		return
	}
	if keep {
		fmt.Fprintln(b.w)
	} else {
		fmt.Fprint(b.w, "\r\033[K")
	}
	b.last = ""
}

// Render is one frame: "label [#####.....]  45% 9/20 eta 1m2s note". The
// ETA is measured from the units done since the start (cur - base) in
// elapsed; "?" before the first. A total of 0 (unknown) gives
// "label 9 done note".
func Render(label string, cur, total, base int, elapsed time.Duration, note string) string {
	if total <= 0 {
		// Unknown total: the count alone.
		s := fmt.Sprintf("%s %d done", label, cur)
		if note != "" {
			s += " " + note
		}
		return s
	}
	frac := 0.0
	if total > 0 {
		frac = min(max(float64(cur)/float64(total), 0), 1)
	}
	n := int(frac * Width)
	eta := "?"
	if d, ok := ETA(cur-base, total-cur, elapsed); ok {
		eta = Duration(d)
	}
	s := fmt.Sprintf("%s [%s%s] %3.0f%% %d/%d eta %s", label, strings.Repeat("#", n), strings.Repeat(".", Width-n), 100*frac, cur, total, eta)
	if note != "" {
		s += " " + note
	}
	return s
}

// ETA is the time left for left units at the rate of done units in
// elapsed; ok is false before the first unit.
func ETA(done, left int, elapsed time.Duration) (time.Duration, bool) {
	if left <= 0 {
		return 0, true
	}
	if done <= 0 || elapsed <= 0 {
		return 0, false
	}
	return time.Duration(float64(elapsed) / float64(done) * float64(left)), true
}

// Duration formats d to the second, days as "2d3h": "0s", "45s", "3m20s",
// "5h2m", "2d3h".
func Duration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}
