package round

import (
	"maps"
	"strings"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/estimator"
	"github.com/rondo-sched/rondo/allocator/throughputs"
)

// completeTypes fills the throughputs the backend defaulted (no table has
// the job's model on the type: a new GPU type, or a model no table knows)
// from what is known: each job's measured and table values, every job the
// estimator measured (finished ones too) and every configuration the
// table profiled (rows: profiled jobs' ratios between types; nil for
// none), completed as a jobs x types matrix (estimator.CompleteTypes). It marks every value's source on the
// job (engine.Job.ThroughputSource): measured, estimated, table or
// defaulted. Types the backend gave no source are the table's.
func completeTypes(o *estimator.Online, s *engine.Snapshot, table map[string]map[string]float64) {
	known := map[string]map[string]float64{}
	want := map[string][]string{}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		src := make(map[string]string, len(j.Throughput))
		row := map[string]float64{}
		for typ, v := range j.Throughput {
			switch {
			case o.Samples(j.ID, typ) > 0:
				src[typ] = engine.SourceMeasured
			case j.ThroughputSource[typ] == engine.SourceDefaulted:
				src[typ] = engine.SourceDefaulted
				want[j.ID] = append(want[j.ID], typ)
				continue
			default:
				src[typ] = engine.SourceTable
			}
			if v > 0 {
				row[typ] = v
			}
		}
		if len(row) == 0 {
			// Nothing known on the cluster's types: its table
			// configuration on others (v100) carries its speed over.
			// Only then: a job's ratios to the types at hand are the
			// better guide, its K80 speed says little of an L40S.
			row = table[tableKey(j)]
		}
		known[j.ID] = row // what the round uses: measured over table
		j.ThroughputSource = src
	}
	if len(want) == 0 {
		return // the common case (a table knows every job): no rows built
	}
	for id, row := range o.Means() {
		if _, ok := known[id]; !ok { // the snapshot's jobs: as the round uses them
			known[id] = row
		}
	}
	maps.Copy(known, table) // keys apart from job ids (tableRows)
	est := estimator.CompleteTypes(known, want)
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if len(want[j.ID]) == 0 {
			continue
		}
		j.Throughput = maps.Clone(j.Throughput) // the backend may share the map
		for _, typ := range want[j.ID] {
			e := est[j.ID][typ]
			j.Throughput[typ] = e.Value
			if !e.Defaulted {
				j.ThroughputSource[typ] = engine.SourceEstimated
			}
		}
	}
}

// tableKey is the row of a job's table configuration (tableRows).
func tableKey(j *engine.Job) string {
	return "table " + throughputs.Key{Model: j.Model, ScaleFactor: j.ScaleFactor}.String()
}

// tableRows are a table's configurations as rows of the completion, keyed
// "table " + the configuration (Nomad refuses job ids with spaces, so no
// job shadows one). Gavel's "*_unconsolidated" variants are
// not GPU types and are left out.
func tableRows(tb *throughputs.Table) map[string]map[string]float64 {
	rows := map[string]map[string]float64{}
	for _, typ := range tb.Types() {
		if strings.HasSuffix(typ, "_unconsolidated") {
			continue
		}
		for _, k := range tb.Keys(typ) {
			if v, ok := tb.Isolated(k, typ); ok && v > 0 {
				id := "table " + k.String() // tableKey
				if rows[id] == nil {
					rows[id] = map[string]float64{}
				}
				rows[id][typ] = v
			}
		}
	}
	return rows
}
