package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/cli"

	"github.com/rondo-sched/rondo/allocator/sim"
	"github.com/rondo-sched/rondo/allocator/sim/sweep"
	"github.com/rondo-sched/rondo/internal/progress"
	"github.com/rondo-sched/rondo/policies/dl2"
)

func init() {
	register("dl2", func() (cli.Command, error) { return &dl2Cmd{}, nil })
	register("dl2 train", func() (cli.Command, error) { return newDL2Train(), nil })
}

type dl2Cmd struct{}

func (*dl2Cmd) Synopsis() string { return "DL2: the learned sizer of workers and parameter servers" }
func (*dl2Cmd) Help() string {
	return "Usage: rondo dl2 <subcommand>\n\n  train   train a DL2 model: supervised from a teacher, then online actor-critic\n"
}
func (*dl2Cmd) Run([]string) int { return cli.RunResultHelp }

type dl2Train struct {
	base
	out, curve, teacher, cluster, hidden, speeds, from, arch                     string
	perServer, cpus, window, spare, warmup, batch, replay                        int
	slTraces, slPasses, rlSteps, valTraces, jobs, testTraces, updateEvery        int
	round, rate, noise, slLR, rlLR, vLR, gamma, entropy, epsilon                 float64
	seed                                                                         int64
	noAC, noExplore, noReplay, quiet, slotReward, noShaping, keepLast, advCenter bool
	types                                                                        string
}

func newDL2Train() *dl2Train {
	c := &dl2Train{base: newBase("dl2 train", "Train a DL2 model: supervised from a teacher's decisions, then online actor-critic (DL2 §4)", "[options]")}
	f := c.flags
	f.StringVar(&c.out, "out", "dl2-model.json", "where to write the model")
	f.StringVar(&c.curve, "curve", "", "write the learning curve here as JSON (and an SVG beside it, same name with .svg)")
	f.StringVar(&c.teacher, "teacher", "drf", "the scheduler the supervised bootstrap imitates: drf, fifo or srtf")
	f.StringVar(&c.cluster, "cluster", "v100=26", "GPUs (one type; as rondo simulate)")
	f.IntVar(&c.perServer, "gpus-per-server", 2, "GPUs per server")
	f.IntVar(&c.cpus, "cpus-per-server", 16, "CPU cores per server")
	f.Float64Var(&c.round, "round", 1200, "slot length, seconds")
	f.StringVar(&c.speeds, "speeds", "", "CSV of measured speeds (model,ps,workers,epochs_per_hour) replacing Table 1's model for the models it names")
	f.Float64Var(&c.noise, "speed-noise", 0.1, "slot-to-slot speed noise (relative)")
	f.IntVar(&c.jobs, "jobs", 120, "jobs per generated trace")
	f.Float64Var(&c.rate, "rate", 0, "jobs per slot of the generated traces (0: the generator's default)")
	f.IntVar(&c.slTraces, "sl-traces", 8, "training traces of the supervised bootstrap")
	f.IntVar(&c.slPasses, "sl-passes", 30, "passes over the teacher's decisions")
	f.Float64Var(&c.slLR, "sl-lr", 1e-3, "supervised learning rate (Adam)")
	f.IntVar(&c.rlSteps, "steps", 8000, "online RL steps (one update per slot)")
	f.Float64Var(&c.rlLR, "rl-lr", 1e-4, "RL learning rate of the policy network (Adam)")
	f.Float64Var(&c.vLR, "value-lr", 1e-3, "RL learning rate of the value network (Adam)")
	f.IntVar(&c.warmup, "warmup", 1000, "first RL steps that train only the value network")
	f.IntVar(&c.batch, "batch", 64, "RL minibatch (decisions per update)")
	f.IntVar(&c.replay, "replay", 8192, "experience replay buffer, decisions")
	f.Float64Var(&c.gamma, "gamma", 0.9, "reward discount per slot")
	f.Float64Var(&c.entropy, "entropy", 0.01, "entropy weight")
	f.Float64Var(&c.epsilon, "epsilon", 0.2, "job-aware exploration probability")
	f.BoolVar(&c.noShaping, "no-shaping", false, "no potential-based reward shaping of the per-decision steps (the expected gain of each decision)")
	f.BoolVar(&c.slotReward, "slot-reward", false, "every decision of a slot gets the slot's reward and the next slot's state (DL2 as written) instead of per-decision TD steps")
	f.BoolVar(&c.advCenter, "adv-center", false, "subtract the minibatch's mean advantage before dividing by its standard deviation (default: scale only)")
	f.IntVar(&c.updateEvery, "update-every", 1, "one RL update every this many slots (-steps counts updates)")
	f.IntVar(&c.valTraces, "val-traces", 3, "held-out validation traces (the learning curve; they pick the model kept)")
	f.IntVar(&c.testTraces, "test-traces", 5, "held-out test traces (seeds 1..N, the same for every -seed) the printed numbers are measured on")
	f.BoolVar(&c.keepLast, "keep-last", false, "keep the networks of the last RL step instead of the best on the validation traces")
	f.IntVar(&c.window, "window", 40, "J: jobs per decision window")
	f.StringVar(&c.arch, "arch", dl2.ArchPerJob, "the networks: perjob (weights shared across job positions: a per-job encoder, a mean-pooled context, a per-job head; online RL improves on the bootstrap with it) or mlp (DL2's: one MLP over the whole window)")
	f.StringVar(&c.hidden, "hidden", "64,64", "hidden layer widths (perjob: the per-job encoder's, then the head's and the context networks')")
	f.IntVar(&c.spare, "spare-types", 4, "spare one-hot slots for job types not seen in training")
	f.StringVar(&c.types, "types", "", "comma-separated job types of the training traces and the model's one-hot at the start (default: all; validation and test traces have all)")
	f.StringVar(&c.from, "from", "", "continue training this model (no supervised step unless -sl-passes is given explicitly)")
	f.Int64Var(&c.seed, "seed", 1, "seed of the networks, the training and validation traces (100000·seed onwards) and the sampling (the speed noise and the test traces are the same for every seed)")
	f.BoolVar(&c.noAC, "no-actor-critic", false, "ablation: a moving average of rewards as the baseline instead of the value network")
	f.BoolVar(&c.noExplore, "no-explore", false, "ablation: no job-aware exploration")
	f.BoolVar(&c.noReplay, "no-replay", false, "ablation: no experience replay (the latest slot's decisions only)")
	f.BoolVar(&c.quiet, "quiet", false, "no progress bar")
	return c
}

// dl2Config is `rondo dl2 train`'s flags as a TrainConfig (tests and
// the docs' experiments start from them).
func dl2Config(c *dl2Train) (dl2.TrainConfig, error) {
	models := dl2.Table1()
	if c.speeds != "" {
		f, err := os.Open(c.speeds)
		if err != nil {
			return dl2.TrainConfig{}, err
		}
		defer f.Close()
		if models, err = dl2.ReadSpeedCSV(c.speeds, f, models); err != nil {
			return dl2.TrainConfig{}, err
		}
	}
	gpus, err := oneTypeGPUs(c.cluster)
	if err != nil {
		return dl2.TrainConfig{}, err
	}
	if c.perServer < 1 || gpus%c.perServer != 0 {
		return dl2.TrainConfig{}, fmt.Errorf("-gpus-per-server %d does not divide %d GPUs", c.perServer, gpus)
	}
	hidden, err := parseInts(c.hidden)
	if err != nil {
		return dl2.TrainConfig{}, fmt.Errorf("-hidden: %v", err)
	}
	var types []string
	if c.types != "" {
		for _, t := range strings.Split(c.types, ",") {
			if _, ok := models[t]; !ok {
				return dl2.TrainConfig{}, fmt.Errorf("-types: unknown model %q (known: %s)", t, strings.Join(models.Names(), ", "))
			}
			types = append(types, t)
		}
	}
	if !slices.Contains(dl2.Archs, c.arch) {
		return dl2.TrainConfig{}, fmt.Errorf("-arch: unknown architecture %q (known: %s)", c.arch, strings.Join(dl2.Archs, ", "))
	}
	if c.window < 1 {
		return dl2.TrainConfig{}, fmt.Errorf("-window must be >= 1")
	}
	cfg := dl2.TrainConfig{
		Env:     dl2.Env{Servers: dl2.Servers(gpus/c.perServer, c.perServer, c.cpus), SlotS: c.round, Models: models, Noise: c.noise, Seed: 1},
		Teacher: c.teacher, Window: c.window, Arch: c.arch, Hidden: hidden, Spare: c.spare, Types: types,
		Gen: dl2.GenOptions{Jobs: c.jobs, JobsPerSlot: c.rate, SlotS: c.round}, TrainModels: types,
		TrainSeed: 100000 * c.seed, ValSeed: 100000*c.seed + 90000, SLTraces: c.slTraces, ValTraces: c.valTraces, Seed: c.seed,
		TestSeed: 1, TestTraces: c.testTraces,
		SL: dl2.SLOptions{Passes: c.slPasses, Batch: 64, LR: c.slLR, Seed: c.seed},
		RL: dl2.RLOptions{Steps: c.rlSteps, Batch: c.batch, LR: c.rlLR, ValueLR: c.vLR, Warmup: c.warmup, Gamma: c.gamma, Entropy: c.entropy, Epsilon: c.epsilon, Replay: c.replay, SlotReward: c.slotReward, Shaping: !c.noShaping,
			CenterAdvantages: c.advCenter, UpdateEvery: c.updateEvery,
			ActorCritic: !c.noAC, Seed: c.seed, EvalEvery: max(c.rlSteps/20, 1), KeepBest: !c.keepLast},
	}
	if c.noExplore {
		cfg.RL.Epsilon = 0
	}
	if c.noReplay {
		cfg.RL.Replay = 0
	}
	return cfg, nil
}

// oneTypeGPUs is the GPUs of a -cluster spec (sim.ParseCluster's syntax),
// all types counted as one: DL2's model has one GPU type.
func oneTypeGPUs(cluster string) (int, error) {
	m, err := sim.ParseCluster(cluster)
	if err != nil {
		return 0, fmt.Errorf("-cluster: %v", err)
	}
	n := 0
	for _, v := range m {
		n += v
	}
	if n < 1 {
		return 0, fmt.Errorf("-cluster: %q has no GPUs", cluster)
	}
	return n, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", p)
		}
		out = append(out, v)
	}
	return out, nil
}

func (c *dl2Train) Run(args []string) int {
	if code := c.parse(args); code >= 0 {
		return code
	}
	if c.flags.NArg() > 0 {
		return c.fail(fmt.Errorf("unexpected argument %q", c.flags.Arg(0)))
	}
	cfg, err := dl2Config(c)
	if err != nil {
		return c.fail(err)
	}
	if c.from != "" {
		if cfg.Model, err = dl2.LoadModel(c.from); err != nil {
			return c.fail(err)
		}
		slSet, archSet := false, false
		c.flags.Visit(func(f *flag.Flag) { slSet, archSet = slSet || f.Name == "sl-passes", archSet || f.Name == "arch" })
		if a := cmp.Or(cfg.Model.Arch, dl2.ArchMLP); archSet && a != c.arch {
			return c.fail(fmt.Errorf("-arch %s: %s is a %s model", c.arch, c.from, a))
		}
		if !slSet {
			cfg.SL.Passes = 0
		}
	}
	var bar *progress.Bar // nil: silent
	if !c.quiet {
		bar = progress.New(c.stderr, "training", cfg.RL.Steps)
	}
	cfg.Log = func(f string, a ...any) { bar.Line(fmt.Sprintf(f, a...)) }
	cfg.RL.Progress = func(step int, curve []dl2.CurvePoint) {
		bar.Set(step, fmt.Sprintf("avg JCT %.2f h", curve[len(curve)-1].AvgJCT/3600))
	}
	cfg.SL.Progress = func(pass int, loss float64) {
		bar.Line(fmt.Sprintf("supervised pass %d/%d: cross-entropy %.4f", pass+1, cfg.SL.Passes, loss))
	}
	m, rep, err := dl2.Train(cfg)
	bar.Done(true)
	if err != nil {
		return c.fail(err)
	}
	if err := m.Save(c.out); err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.stdout, "model %s: teacher %s %.2f h, after supervised %.2f h, after RL %.2f h (avg JCT on %d held-out test traces)\n",
		c.out, rep.Teacher, rep.TeacherAvgJCT/3600, rep.SLAvgJCT/3600, rep.FinalAvgJCT/3600, cfg.TestTraces)
	if c.curve != "" {
		if err := writeCurve(c.curve, rep); err != nil {
			return c.fail(err)
		}
	}
	return 0
}

// writeCurve writes the report (JSON) and the learning curve as an SVG.
func writeCurve(path string, rep *dl2.TrainReport) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return err
	}
	f := &sweep.Figure{Title: "DL2 online RL: average JCT on held-out traces", XLabel: "RL step (slot updates)", YLabel: "Average JCT (hours)",
		Note: fmt.Sprintf("validation traces; teacher %s %.2f h", rep.Teacher, rep.TeacherValJCT/3600)}
	s := sweep.Series{Name: "dl2"}
	t := sweep.Series{Name: rep.Teacher}
	for _, p := range rep.Curve {
		s.X, s.Y = append(s.X, float64(p.Step)), append(s.Y, p.AvgJCT/3600)
		t.X, t.Y = append(t.X, float64(p.Step)), append(t.Y, rep.TeacherValJCT/3600)
	}
	f.Series = []sweep.Series{s, t}
	return os.WriteFile(strings.TrimSuffix(path, filepath.Ext(path))+".svg", f.SVG(), 0o644)
}
