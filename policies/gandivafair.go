package policies

import "fmt"

func init() {
	define("gandiva_fair", func(in *instance, p *Problem) (*Allocation, error) {
		// TODO(#15): user shares, trading and the per-job split.
		return nil, fmt.Errorf("gandiva_fair: not built yet")
	})
}
