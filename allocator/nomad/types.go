package nomad

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"

	"github.com/hashicorp/nomad/api"
)

// gavelFamilies are the families Gavel's throughput table names: they keep
// their bare names ("v100", not "v100-16gb"), so that the table, traces and
// existing configs still match.
var gavelFamilies = map[string]bool{"v100": true, "p100": true, "k80": true}

// GPUType is DefaultGPUType without the device's memory: the memory size
// in the model name when it has one ("NVIDIA A100-SXM4-40GB" →
// "a100-40gb"), else the family alone ("NVIDIA H100 PCIe" → "h100").
func GPUType(model string) string { return DefaultGPUType(model, 0) }

// DefaultGPUType is Rondo's GPU type for a device model when no gpu_type
// block maps it: one type per model family and memory size.
//
//   - The family is the first word of the lower-cased name that holds a
//     digit, skipping vendor and brand words ("Tesla V100-SXM2-16GB" →
//     "v100", "NVIDIA L40S" → "l40s"; no such word: all words joined).
//   - Gavel's families (v100, p100, k80) are the type as they are.
//   - Any other family gets "-<N>gb": N from the name when it says it
//     ("80GB"), else from memMiB (the plugin's memory attribute) rounded up
//     to the nominal size (nominalGB); without either, the family alone.
//     So A100 40GB and 80GB are two types ("a100-40gb", "a100-80gb"), and
//     "NVIDIA H100 80GB HBM3" is "h100-80gb". Form factors of one family
//     and size (SXM, PCIe) share the type: a gpu_type block splits them.
//   - A MIG instance ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", the device
//     plugin's group name) is "<family>-mig-<profile>" ("a100-mig-3g.20gb"):
//     the profile names its slice's size, and a slice of a GPU must not
//     count as the whole GPU.
func DefaultGPUType(model string, memMiB int64) string {
	if base, profile, ok := strings.Cut(model, " MIG "); ok {
		return family(base) + "-mig-" + strings.ToLower(strings.TrimSpace(profile))
	}
	f := family(model)
	if gavelFamilies[f] {
		return f
	}
	gb := nameGB(model)
	if gb == 0 {
		gb = nominalGB(memMiB)
	}
	if gb == 0 {
		return f
	}
	return fmt.Sprintf("%s-%dgb", f, gb)
}

func words(model string) []string {
	return strings.FieldsFunc(strings.ToLower(model), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// family is the first word holding a digit, past vendor and brand words.
func family(model string) string {
	ws := words(model)
	for _, w := range ws {
		switch w {
		case "tesla", "nvidia", "geforce", "quadro":
			continue
		}
		if strings.ContainsAny(w, "0123456789") {
			return w
		}
	}
	return strings.Join(ws, "-")
}

// nameGB is the memory size a model name states ("...-80GB", "80GB HBM3"),
// 0 when it states none.
func nameGB(model string) int {
	for _, w := range words(model) {
		if n, ok := strings.CutSuffix(w, "gb"); ok {
			if v, err := strconv.Atoi(n); err == nil && v > 0 {
				return v
			}
		}
	}
	return 0
}

// nominalSizes are GPU memory sizes as sold, in GB.
var nominalSizes = []int{4, 6, 8, 10, 11, 12, 16, 20, 24, 32, 40, 48, 64, 80, 94, 96, 141, 180, 192, 288}

// nominalGB is the size a GPU is sold as from the memory NVML reports,
// which is less (ECC and the driver's reservation take up to ~7%: an L40S
// reports 46068 MiB, an H100 80GB 81559 MiB, a K80 11441 MiB): the
// smallest nominal size at least the reported GiB and within 8% of it,
// else the reported GiB rounded. 0 for no memory.
func nominalGB(memMiB int64) int {
	if memMiB <= 0 {
		return 0
	}
	gib := float64(memMiB) / 1024
	for _, s := range nominalSizes {
		if float64(s) >= gib-0.01 && gib >= 0.92*float64(s) {
			return s
		}
	}
	return int(math.Round(gib))
}

// DeviceType is the GPU type of a Nomad device group (vendor nvidia, type
// gpu): names maps its model (the group name) when it holds it (the
// config's gpu_type blocks), else DefaultGPUType of the name and the
// group's memory attribute. `rondo config validate -nomad` and the backend
// use it alike.
func DeviceType(d *api.NodeDeviceResource, names map[string]string) string {
	if t, ok := names[d.Name]; ok {
		return t
	}
	return DefaultGPUType(d.Name, memoryMiB(d.Attributes["memory"]))
}

// memoryMiB reads the plugin's memory attribute (an integer with unit
// MiB; the official plugin's too), 0 when absent or in another form.
func memoryMiB(a *api.Attribute) int64 {
	if a == nil || a.IntVal == nil {
		return 0
	}
	v := *a.IntVal
	switch strings.ToLower(a.Unit) {
	case "mib", "":
		return v
	case "gib":
		return v * 1024
	case "mb":
		return v * 1000 * 1000 / (1 << 20)
	case "gb":
		return v * 1000 * 1000 * 1000 / (1 << 20)
	}
	return 0
}
