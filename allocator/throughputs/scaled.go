package throughputs

// Scaled is the whole job's steps/s on gpus GPUs of gpuType, for an elastic
// job resized away from its profiled scale factor: the table's value at
// that scale factor when it was measured (Gavel profiles 1, 2, 4 and 8
// GPUs), else linear scaling from the largest measured scale factor below
// gpus, which carries that scale's measured efficiency (its per-GPU
// throughput): T(n) = T(s)·n/s. Beyond the largest measurement this is
// optimistic (real data-parallel scaling keeps losing efficiency); it is
// never extrapolated downward. ok is false when no scale factor ≤ gpus of
// the model was measured on gpuType.
func (t *Table) Scaled(model string, gpus int, gpuType string) (float64, bool) {
	if v, ok := t.Lookup(model, gpus, gpuType); ok {
		return v, true
	}
	best := 0
	var tput float64
	for k, e := range t.types[gpuType] {
		if k.Model == model && k.ScaleFactor <= gpus && k.ScaleFactor > best {
			best, tput = k.ScaleFactor, e.isolated
		}
	}
	if best == 0 {
		return 0, false
	}
	return tput * float64(gpus) / float64(best), true
}
