package trace

// Template is one of the 26 job configurations Gavel's generator picks
// from, in the order of Gavel's job table (the order matters: choice draws an
// index). Distributed templates also exist at scale factors 2, 4 and 8.
type Template struct {
	Model       string
	Distributed bool
}

// Templates is Gavel's job table: ResNet-18 and Transformer at five batch
// sizes, ResNet-50 at four, LM at five (all distributed); Recommendation at
// five batch sizes, A3C and CycleGAN (single-GPU only).
var Templates = func() []Template {
	var t []Template
	add := func(format string, distributed bool, batches ...int) {
		for _, b := range batches {
			t = append(t, Template{Model: sprintf(format, b), Distributed: distributed})
		}
	}
	add("ResNet-18 (batch size %d)", true, 16, 32, 64, 128, 256)
	add("ResNet-50 (batch size %d)", true, 16, 32, 64, 128)
	add("Transformer (batch size %d)", true, 16, 32, 64, 128, 256)
	add("LM (batch size %d)", true, 5, 10, 20, 40, 80)
	add("Recommendation (batch size %d)", false, 512, 1024, 2048, 4096, 8192)
	t = append(t, Template{Model: "A3C"}, Template{Model: "CycleGAN"})
	return t
}()
