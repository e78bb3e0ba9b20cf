package synergy

import "strings"

// Gavel's job models (allocator/trace.Templates, Gavel's Table 2) and the
// Synergy profile each runs under when a trace names none (issue #14:
// heterogeneous GPUs and CPU sensitivity together). Gavel measured its
// throughputs, Synergy its profiles; no job is in both, so each Gavel model
// takes the profile of the Synergy model closest in what limits its input
// pipeline:
//
//   - ResNet-18 → res18, ResNet-50 → res50, Transformer → transformer,
//     LM (a Wikitext-2 LSTM) → lstm: the same architectures. Gavel's
//     ResNet-18 trains on CIFAR-10 (small images, light augmentation),
//     Synergy's on ImageNet (JPEG decoding): res18 overstates its CPU
//     appetite; the mapping reads "if Gavel's jobs were Synergy's".
//   - CycleGAN (monet2photo, batch size 1) → res50: an image model, but
//     with two generators and two discriminators per 256×256 image its GPU
//     work per decoded image is the largest of the set; res50, the image
//     profile with the most GPU work per image, is nearly GPU-bound (1.15×
//     at 4 cores per GPU, flat beyond).
//   - Recommendation (Recoder, an autoencoder over ML-20M's sparse rating
//     vectors held in memory: no decoding, no augmentation) → vae,
//     Synergy's autoencoder: insensitive (1.0 from 1 core per GPU).
//   - A3C (deep RL on Atari Pong) has no Synergy counterpart. Assumed
//     CPU-bound: its actor processes emulate the game and step the
//     environment on CPU cores, so throughput grows about linearly with
//     cores until the GPU learner saturates, and memory (a small replay of
//     frames per actor) does not matter. It takes res18's profile, which
//     has exactly that shape: linear from 1 to 9 cores per GPU (0.37 to
//     2.4× the 3-core share), flat in memory from 62.5 GB.
var GavelModels = map[string]string{
	"ResNet-18":      "res18",
	"ResNet-50":      "res50",
	"Transformer":    "transformer",
	"LM":             "lstm",
	"CycleGAN":       "res50",
	"Recommendation": "vae",
	"A3C":            "res18",
}

// ForGavelModel is the Synergy profile (a model name for Lookup) of a
// Gavel job model such as "ResNet-18 (batch size 64)" (the batch size does
// not matter: Synergy profiles one batch per model), or "" for a model
// that is not Gavel's (the job stays insensitive).
func ForGavelModel(model string) string {
	base, _, _ := strings.Cut(model, " (")
	return GavelModels[strings.TrimSpace(base)]
}
