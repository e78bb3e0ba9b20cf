package deviceplugin

import (
	"fmt"

	"github.com/hashicorp/nomad/plugins/shared/structs"
)

func statString(v *structs.StatValue) string {
	var s string
	switch {
	case v.IntNumeratorVal != nil && v.IntDenominatorVal != nil:
		s = fmt.Sprintf("%d/%d", *v.IntNumeratorVal, *v.IntDenominatorVal)
	case v.IntNumeratorVal != nil:
		s = fmt.Sprint(*v.IntNumeratorVal)
	case v.FloatNumeratorVal != nil:
		s = fmt.Sprint(*v.FloatNumeratorVal)
	case v.StringVal != nil:
		s = *v.StringVal
	case v.BoolVal != nil:
		s = fmt.Sprint(*v.BoolVal)
	}
	if v.Unit != "" {
		s += " " + v.Unit
	}
	return s
}
