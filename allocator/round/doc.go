// Package round is the decide step of observe → round → enforce when the
// config declares virtual clusters, and the stages every round shares:
//
//	estimate  Estimating (estimate.go): measured throughputs replace the table's
//	VCs       Quota (quota.go): VCs declared as GPU shares, without cells
//	          Cells (cells.go, selectors.go, celllayer.go): VCs over HiveD cells
//	policy,   one engine per VC (its policy) and one for opportunistic jobs
//	mechanism (Engines, engines.go), each running Gavel's mechanism
//	intents   engine.Annotate on the merged plan
//
// A round is a pure function of the snapshot and the deciders' own state;
// rondo agent and rondo simulate build the same deciders
// (cmd/rondo/decider.go).
package round
