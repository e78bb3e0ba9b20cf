# Preemption that respects the work (#21): the top level's values are the
# default of VCs that set none, the opportunistic engine's and the
# cluster's without VCs; a VC overrides each attribute on its own.
round_seconds    = 300
min_runtime      = "30m"
checkpoint_aware = true
reserve_after    = "1h"

vc "research" {
  gpus        = { v100 = 8 }
  min_runtime = "0s"            # overrides the top level's 30m
}
vc "prod" {
  gpus             = { v100 = 4 }
  policy           = "fifo"
  checkpoint_aware = false
  reserve_after    = "20m"
}
vc "fair" {
  gpus   = { k80 = 4 }
  policy = "gandiva_fair"       # its own mechanism: it sets none of the three
}
