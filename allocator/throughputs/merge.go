package throughputs

// Over is t laid over base: every (type, configuration) t measured is
// t's entry (its isolated and pair throughputs), the rest base's. An
// operator's file (the config's throughputs) so adds types Gavel's table
// lacks (a100-80gb, h100-80gb) and corrects configurations it has, while
// what it does not say keeps Gavel's values. Neither table changes.
func (t *Table) Over(base *Table) *Table {
	out := &Table{types: make(map[string]map[Key]*entry, len(base.types)+len(t.types))}
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
