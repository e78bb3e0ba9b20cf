package throughputs

// Over is t laid over base: every (type, configuration) t measured is
// t's entry (its isolated and pair throughputs), the rest base's. An
// operator's file (the config's throughputs) so adds types Gavel's table
// lacks (a100-80gb, h100-80gb) and corrects configurations it has, while
// what it does not say keeps Gavel's values. Neither table changes.
//
// The types t adds (Added) list only the configurations the operator
// profiled there: a configuration missing on one is not profiled, where
// in Gavel's table it means the job cannot run on the type.
func (t *Table) Over(base *Table) *Table {
	out := &Table{types: make(map[string]map[Key]*entry, len(base.types)+len(t.types)), added: map[string]bool{}}
	for typ := range t.types {
		if _, ok := base.types[typ]; !ok || base.added[typ] {
			out.added[typ] = true
		}
	}
	for _, src := range []*Table{base, t} {
		for typ, jobs := range src.types {
			m := out.types[typ]
			if m == nil {
				m = make(map[Key]*entry, len(jobs))
				out.types[typ] = m
			}
			for k, e := range jobs {
				m[k] = e // entries are read-only once parsed: shared
			}
		}
	}
	return out
}

// Added reports whether an overlay (Over) added gpuType to a base table
// that lacked it: a configuration missing there is unknown, not
// infeasible.
func (t *Table) Added(gpuType string) bool { return t.added[gpuType] }
