package nomad

import (
	"strings"
	"unicode"
)

// GPUType maps a device model name to Rondo's GPU type: the first word of
// the lower-cased name that holds a digit, skipping vendor and brand words
// ("Tesla V100-SXM2-16GB" → "v100", "NVIDIA H100 80GB HBM3" → "h100",
// "Tesla K80" → "k80"). The throughput table and cell configs use these
// short names.
//
// A MIG instance ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", the device plugin's
// group name) is a type of its own, "a100-mig-3g.20gb": a slice of a GPU
// must not count as the whole GPU.
func GPUType(model string) string {
	if base, profile, ok := strings.Cut(model, " MIG "); ok {
		return GPUType(base) + "-mig-" + strings.ToLower(strings.TrimSpace(profile))
	}
	words := strings.FieldsFunc(strings.ToLower(model), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for _, w := range words {
		switch w {
		case "tesla", "nvidia", "geforce", "quadro":
			continue
		}
		if strings.ContainsAny(w, "0123456789") {
			return w
		}
	}
	return strings.Join(words, "-")
}
