package sweep

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Series is one curve.
type Series struct {
	Name string
	X, Y []float64
	// Lo and Hi, when set (same length as X), draw a shaded band.
	Lo, Hi []float64
	// BlowUpX, when > 0, extends the curve with a dashed segment from its
	// last point to (BlowUpX, top of the axis): the rate it did not sustain.
	BlowUpX float64
	// Markers draws a dot at every point.
	Markers bool
}

// Figure is a line chart with axes, ticks, a legend and a title.
type Figure struct {
	Title, XLabel, YLabel string
	Series                []Series
	LogX                  bool
	// Axis limits; a zero pair means automatic.
	XMin, XMax, YMin, YMax float64
	Width, Height          int
	// Note is a small line under the title (e.g. the cluster and seeds).
	Note string
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// niceTicks returns round tick values covering [lo, hi] (about n of them)
// and the rounded-out limits.
func niceTicks(lo, hi float64, n int) ([]float64, float64, float64) {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(max(n, 1))
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	lo = math.Floor(lo/step+1e-9) * step
	hi = math.Ceil(hi/step-1e-9) * step
	var ticks []float64
	for v := lo; v <= hi+step/2; v += step {
		ticks = append(ticks, math.Round(v/step)*step)
	}
	return ticks, lo, hi
}

// logTicks returns 1-2-5 ticks within [lo, hi] and decade-rounded limits.
func logTicks(lo, hi float64) ([]float64, float64, float64) {
	if lo <= 0 {
		lo = 1e-3
	}
	if hi <= lo {
		hi = lo * 10
	}
	a, b := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	var ticks []float64
	mult := []float64{1, 2, 5}
	if b-a > 3 {
		mult = []float64{1}
	}
	for e := a; e <= b; e++ {
		for _, m := range mult {
			v := m * math.Pow(10, e)
			if v >= math.Pow(10, a)*(1-1e-9) && v <= math.Pow(10, b)*(1+1e-9) {
				ticks = append(ticks, v)
			}
		}
	}
	return ticks, math.Pow(10, a), math.Pow(10, b)
}

func fmtNum(v float64) string {
	if v == 0 {
		return "0"
	}
	if math.Abs(v) >= 1e5 || math.Abs(v) < 1e-3 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64)
}

func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// SVG renders the figure as a standalone SVG document.
func (f *Figure) SVG() []byte {
	w, h := f.Width, f.Height
	if w <= 0 {
		w = 760
	}
	if h <= 0 {
		h = 480
	}
	left, right, top, bottom := 72.0, 24.0, 56.0, 58.0
	if f.Note == "" {
		top = 44
	}
	pw, ph := float64(w)-left-right, float64(h)-top-bottom

	// Data ranges.
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), 0.0, math.Inf(-1)
	for _, s := range f.Series {
		for i, x := range s.X {
			if f.LogX && x <= 0 {
				continue
			}
			xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
			y := s.Y[i]
			if len(s.Hi) == len(s.X) {
				y = math.Max(y, s.Hi[i])
			}
			ymax = math.Max(ymax, y)
		}
		if s.BlowUpX > 0 {
			xmax = math.Max(xmax, s.BlowUpX)
		}
	}
	if math.IsInf(xmin, 1) {
		xmin, xmax, ymax = 0, 1, 1
	}
	if f.XMin != 0 || f.XMax != 0 {
		xmin, xmax = f.XMin, f.XMax
	}
	if f.YMin != 0 || f.YMax != 0 {
		ymin, ymax = f.YMin, f.YMax
	}
	var xt, yt []float64
	if f.LogX {
		xt, xmin, xmax = logTicks(xmin, xmax)
	} else {
		xt, xmin, xmax = niceTicks(math.Min(xmin, 0), xmax, 8)
	}
	if f.YMin != 0 || f.YMax != 0 {
		yt, _, _ = niceTicks(ymin, ymax, 6)
		kept := yt[:0]
		for _, v := range yt {
			if v >= ymin-1e-9 && v <= ymax+1e-9 {
				kept = append(kept, v)
			}
		}
		yt = kept
	} else {
		yt, ymin, ymax = niceTicks(ymin, ymax*1.05, 6)
	}
	px := func(x float64) float64 {
		if f.LogX {
			return left + (math.Log10(x)-math.Log10(xmin))/(math.Log10(xmax)-math.Log10(xmin))*pw
		}
		return left + (x-xmin)/(xmax-xmin)*pw
	}
	py := func(y float64) float64 { return top + ph - (y-ymin)/(ymax-ymin)*ph }
	pt := func(x, y float64) string { return fmt.Sprintf("%.2f,%.2f", px(x), py(y)) }

	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="13">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<defs><clipPath id="plot"><rect x="%.2f" y="%.2f" width="%.2f" height="%.2f"/></clipPath></defs>`+"\n", left, top, pw, ph)
	fmt.Fprintf(&b, `<text class="title" x="%.2f" y="24" text-anchor="middle" font-size="16" font-weight="bold">%s</text>`+"\n", float64(w)/2, esc(f.Title))
	if f.Note != "" {
		fmt.Fprintf(&b, `<text class="note" x="%.2f" y="42" text-anchor="middle" font-size="11" fill="#555">%s</text>`+"\n", float64(w)/2, esc(f.Note))
	}
	// Grid and ticks.
	b.WriteString(`<g class="grid" stroke="#e4e4e4" stroke-width="1">` + "\n")
	for _, v := range xt {
		fmt.Fprintf(&b, `<line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f"/>`+"\n", px(v), top, px(v), top+ph)
	}
	for _, v := range yt {
		fmt.Fprintf(&b, `<line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f"/>`+"\n", left, py(v), left+pw, py(v))
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<g class="axes" stroke="black" stroke-width="1.2"><line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f"/><line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f"/></g>`+"\n",
		left, top+ph, left+pw, top+ph, left, top, left, top+ph)
	b.WriteString(`<g class="xticks" text-anchor="middle">` + "\n")
	for _, v := range xt {
		fmt.Fprintf(&b, `<line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f" stroke="black"/><text x="%.2f" y="%.2f">%s</text>`+"\n",
			px(v), top+ph, px(v), top+ph+5, px(v), top+ph+19, fmtNum(v))
	}
	b.WriteString("</g>\n")
	b.WriteString(`<g class="yticks" text-anchor="end">` + "\n")
	for _, v := range yt {
		fmt.Fprintf(&b, `<line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f" stroke="black"/><text x="%.2f" y="%.2f">%s</text>`+"\n",
			left-5, py(v), left, py(v), left-8, py(v)+4, fmtNum(v))
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<text class="xlabel" x="%.2f" y="%.2f" text-anchor="middle" font-size="14">%s</text>`+"\n", left+pw/2, float64(h)-14, esc(f.XLabel))
	fmt.Fprintf(&b, `<text class="ylabel" x="18" y="%.2f" text-anchor="middle" font-size="14" transform="rotate(-90 18 %.2f)">%s</text>`+"\n", top+ph/2, top+ph/2, esc(f.YLabel))

	// Series: bands first, then lines, so lines stay on top.
	b.WriteString(`<g class="series" clip-path="url(#plot)">` + "\n")
	for i, s := range f.Series {
		col := palette[i%len(palette)]
		if len(s.Lo) == len(s.X) && len(s.Hi) == len(s.X) && len(s.X) > 0 {
			var pts []string
			for k := range s.X {
				pts = append(pts, pt(s.X[k], s.Hi[k]))
			}
			for k := len(s.X) - 1; k >= 0; k-- {
				pts = append(pts, pt(s.X[k], s.Lo[k]))
			}
			fmt.Fprintf(&b, `<polygon class="band" points="%s" fill="%s" fill-opacity="0.18" stroke="none"/>`+"\n", strings.Join(pts, " "), col)
		}
	}
	for i, s := range f.Series {
		col := palette[i%len(palette)]
		var pts []string
		for k := range s.X {
			if f.LogX && s.X[k] <= 0 {
				continue
			}
			pts = append(pts, pt(s.X[k], s.Y[k]))
		}
		if len(pts) > 0 {
			fmt.Fprintf(&b, `<polyline class="line" data-series="%s" points="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"/>`+"\n",
				esc(s.Name), strings.Join(pts, " "), col)
		}
		if s.BlowUpX > 0 && len(s.X) > 0 {
			n := len(s.X) - 1
			fmt.Fprintf(&b, `<line class="blowup" x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f" stroke="%s" stroke-width="2" stroke-dasharray="5,4"/>`+"\n",
				px(s.X[n]), py(s.Y[n]), px(s.BlowUpX), top, col)
		}
		if s.Markers {
			for k := range s.X {
				fmt.Fprintf(&b, `<circle cx="%.2f" cy="%.2f" r="3" fill="%s"/>`+"\n", px(s.X[k]), py(s.Y[k]), col)
			}
		}
	}
	b.WriteString("</g>\n")

	// Legend, top left inside the plot.
	lw := 0
	for _, s := range f.Series {
		lw = max(lw, len(s.Name))
	}
	lx, ly := left+10, top+10
	fmt.Fprintf(&b, `<g class="legend"><rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="white" fill-opacity="0.85" stroke="#bbb"/>`+"\n",
		lx, ly, 40+7.2*float64(lw), 8+18*float64(len(f.Series)))
	for i, s := range f.Series {
		col := palette[i%len(palette)]
		y := ly + 14 + 18*float64(i)
		fmt.Fprintf(&b, `<line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f" stroke="%s" stroke-width="3"/><text x="%.2f" y="%.2f">%s</text>`+"\n",
			lx+8, y, lx+30, y, col, lx+36, y+4, esc(s.Name))
	}
	b.WriteString("</g>\n</svg>\n")
	return []byte(b.String())
}

// JCTFigure is average JCT (hours) against input rate, mean ± sd over the
// finished seeds, one curve per policy. A policy that did not finish at a
// rate above its last finished one gets a dashed blow-up segment to that
// rate at the top of the axis (the paper's style).
func JCTFigure(points []Point, title, note string, yMax float64) *Figure {
	f := &Figure{Title: title, Note: note, XLabel: "Input job rate (jobs/hr)", YLabel: "Average JCT (hours)", YMax: yMax}
	for _, pol := range policyOrder(points) {
		s := Series{Name: pol, Markers: true}
		var unfinished []float64
		for _, p := range points {
			if p.Policy != pol {
				continue
			}
			if p.Finished == 0 {
				unfinished = append(unfinished, p.Rate)
				continue
			}
			s.X = append(s.X, p.Rate)
			s.Y = append(s.Y, p.AvgJCTH)
			s.Lo = append(s.Lo, math.Max(p.AvgJCTH-p.AvgJCTHSD, 0))
			s.Hi = append(s.Hi, p.AvgJCTH+p.AvgJCTHSD)
		}
		if len(s.X) > 0 {
			last := s.X[len(s.X)-1]
			for _, r := range unfinished {
				if r > last && (s.BlowUpX == 0 || r < s.BlowUpX) {
					s.BlowUpX = r
				}
			}
		}
		f.Series = append(f.Series, s)
	}
	return f
}

// CDFFigure is the empirical CDF of measured jobs' JCTs (hours, log axis)
// pooled over the finished seeds at one rate, one curve per policy.
func CDFFigure(runs []Run, rate float64, title, note string) *Figure {
	f := &Figure{Title: title, Note: note, XLabel: "JCT (hours, log scale)", YLabel: "Fraction of jobs", LogX: true, YMin: 0, YMax: 1}
	byPol := map[string][]float64{}
	var order []string
	for _, r := range runs {
		if math.Abs(r.Rate-rate) > 1e-9 || !r.Finished() {
			continue
		}
		if _, ok := byPol[r.Policy]; !ok {
			order = append(order, r.Policy)
		}
		for _, v := range r.JCTs {
			byPol[r.Policy] = append(byPol[r.Policy], v/3600)
		}
	}
	for _, pol := range order {
		v := byPol[pol]
		sort.Float64s(v)
		s := Series{Name: pol}
		// At most ~400 points per curve keeps the file small.
		stride := max(1, len(v)/400)
		for i := 0; i < len(v); i += stride {
			s.X = append(s.X, v[i])
			s.Y = append(s.Y, float64(i+1)/float64(len(v)))
		}
		if n := len(v); n > 0 && s.X[len(s.X)-1] != v[n-1] {
			s.X = append(s.X, v[n-1])
			s.Y = append(s.Y, 1)
		}
		f.Series = append(f.Series, s)
	}
	return f
}

func policyOrder(points []Point) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range points {
		if !seen[p.Policy] {
			seen[p.Policy] = true
			out = append(out, p.Policy)
		}
	}
	return out
}
