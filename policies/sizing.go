package policies

// dl2: DL2's sizing (policies/dl2) decides each round how many workers
// and parameter servers every job gets, in a mechanism of its own
// (allocator/sizer, the mechanism Rondo's deciders give a "dl2" VC), not
// through an allocation X. Where an X is asked for anyway (`rondo policy
// solve`, an engine built from the name), it is DL2's fallback, DRF,
// which on GPUs alone is heterogeneity-agnostic max-min fairness.
func init() {
	define("dl2", func(in *instance, p *Problem) (*Allocation, error) {
		return solveLAS("dl2", in, agnosticOnes(in))
	})
}
