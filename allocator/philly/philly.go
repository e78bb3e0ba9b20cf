// Package philly reads the Philly job distribution (duration, GPU count
// pairs sampled from Microsoft's Philly cluster trace, shipped with Gavel
// under the MIT licence in data/LICENSE) and generates multi-tenant traces
// from it: jobs drawn with a seeded generator, assigned to virtual
// clusters, arriving as a Poisson process at a rate that offers a chosen
// load, some of them opportunistic.
package philly

import (
	"bytes"
	_ "embed"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
)

// Pair is one row of the distribution.
type Pair struct {
	DurationS float64
	GPUs      int
}

//go:embed data/philly_job_distribution.csv
var embedded []byte

var (
	embeddedOnce  sync.Once
	embeddedPairs []Pair
	embeddedErr   error
)

// Embedded returns the distribution shipped with the package (33,192
// pairs). The slice is shared: do not modify it.
func Embedded() ([]Pair, error) {
	embeddedOnce.Do(func() { embeddedPairs, embeddedErr = ReadCSV(bytes.NewReader(embedded)) })
	return embeddedPairs, embeddedErr
}

// ReadCSV reads "duration_s,num_gpus" rows after a header line. Durations
// must be positive and finite, GPU counts positive.
func ReadCSV(r io.Reader) ([]Pair, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 2
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("philly: header: %w", err)
	}
	if strings.TrimSpace(head[0]) != "duration_s" || strings.TrimSpace(head[1]) != "num_gpus" {
		return nil, fmt.Errorf("philly: header %q, want duration_s,num_gpus", strings.Join(head, ","))
	}
	var out []Pair
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("philly: %w", err)
		}
		d, err1 := strconv.ParseFloat(strings.TrimSpace(rec[0]), 64)
		g, err2 := strconv.ParseFloat(strings.TrimSpace(rec[1]), 64)
		switch {
		case err1 != nil || d <= 0 || math.IsInf(d, 0) || math.IsNaN(d):
			return nil, fmt.Errorf("philly: line %d: duration %q must be a positive number", line, rec[0])
		case err2 != nil || g < 1 || g != math.Trunc(g) || g > 1<<16:
			return nil, fmt.Errorf("philly: line %d: GPU count %q must be a positive integer", line, rec[1])
		}
		out = append(out, Pair{DurationS: d, GPUs: int(g)})
	}
	if len(out) == 0 {
		return nil, errors.New("philly: no rows")
	}
	return out, nil
}
