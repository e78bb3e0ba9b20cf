#!/usr/bin/env python3
"""Runs Synergy's reference simulator (github msr-fiddle/synergy, simulator/)
on one replayed trace (--trace) or on its own synthetic continuous workload
(--rate, the paper's setup) with one scheduler and prints its result as one
JSON line; or (--generate N) only writes the first N jobs of the synthetic
workload in the replay format, without simulating.

It calls the reference's own Runner class (simulator/runner.py) the way the
reference's benchmark() does for one entry of its hard-coded `schedulers`
list (runner.py:417-477): the flags come from the scheduler string
('FIFO+fair' = proportional, 'FIFO+tune' = Synergy-Tune, 'FIFO' =
Synergy-Greedy), random.seed(seed) first. With --trace, the one
difference: it passes series_id_filter=(0, number of jobs in the trace)
instead of the default (4000, 5000), which would leave the 100 deploy-trace
jobs (ids 0-99) out of the JCT series (stock runner.py prints "Mean = nan"
for them). With --rate it runs the synthetic workload exactly as
benchmark() does (jobs 4000-4999 measured unless --window says otherwise,
class split --split, default 20,70,10; config default
configs/default_cluster.ini, 128 GPUs); --single-gpu keeps every job on one
GPU (the draw is still made), as the paper's single-GPU runs; --record FILE
writes every job it generated in the replay format.

Nothing of the reference is copied here; it is imported from SIMULATOR_DIR.
The modules the reference imports only for deployment (grpc and its rpc
stubs, cvxpy, numa, psutil, matplotlib) must be importable: see
scripts/synergy-reference.sh, which writes stand-ins and runs this.

usage: synergy-reference.py SIMULATOR_DIR (--trace T [--static] | --rate R [--single-gpu] [--window LO:HI])
           --scheduler S [--config C] [--seed N] [--split I,L,S]
           [--jobs-csv F] [--rounds-csv F] [--record F]
       synergy-reference.py SIMULATOR_DIR --generate N --rate R --record F
           [--single-gpu] [--seed N] [--split I,L,S]
"""
import argparse
import collections
import collections.abc
import csv
import json
import logging
import os
import random
import sys
import time

# The reference uses collections.Mapping (removed in Python 3.10).
if not hasattr(collections, "Mapping"):
    collections.Mapping = collections.abc.Mapping


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("simulator_dir")
    ap.add_argument("--trace", help="relative to SIMULATOR_DIR")
    ap.add_argument("--static", action="store_true")
    ap.add_argument("--rate", type=float, help="synthetic continuous workload at this many jobs/h (no --trace)")
    ap.add_argument("--split", default="20,70,10", help="image,language,speech percents (--rate)")
    ap.add_argument("--window", default="4000:5000", help="(--rate) measured job ids LO:HI (the reference's series_id_filter)")
    ap.add_argument("--single-gpu", action="store_true",
                    help="(--rate) every job takes 1 GPU; the GPU count is still drawn, as the paper's single-GPU runs")
    ap.add_argument("--generate", type=int, help="only write the first N synthetic jobs to --record")
    ap.add_argument("--record", help="write every generated job here (replay format: id,model,arrival,iterations,gpus)")
    ap.add_argument("--scheduler", help="e.g. FIFO+fair, LAS+tune, SRTF")
    ap.add_argument("--config", help="default configs/deployment.ini with --trace, configs/default_cluster.ini with --rate")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--jobs-csv", help="append one row per job (trace-independent columns)")
    ap.add_argument("--rounds-csv", help="write every round's placements (time, job, gpus, cpus, mem, iterations credited)")
    ap.add_argument("--log", help="write the simulator's INFO log here (default: discard)")
    args = ap.parse_args()
    if (args.trace is None) == (args.rate is None):
        ap.error("give --trace or --rate")
    if args.generate is not None and (args.rate is None or not args.record):
        ap.error("--generate needs --rate and --record")
    if args.generate is None and not args.scheduler:
        ap.error("--scheduler is required")
    if args.config is None:
        args.config = "configs/deployment.ini" if args.trace else "configs/default_cluster.ini"
    split = tuple(int(x) for x in args.split.split(","))
    for a in ("jobs_csv", "rounds_csv", "log", "record"):
        if getattr(args, a):
            setattr(args, a, os.path.abspath(getattr(args, a)))

    os.chdir(args.simulator_dir)
    sys.path.insert(0, os.getcwd())
    logging.basicConfig(
        filename=args.log or os.devnull,
        format="%(module)s - %(funcName)s - %(levelname)s - %(message)s",
        level=logging.INFO)

    njobs = None
    if args.trace:
        with open(args.trace) as f:
            njobs = sum(1 for line in f if line.strip())

    import runner as ref  # the reference simulator's runner.py
    from events.schedule_event import ScheduleEvent
    from jobs.workload import Workload

    if args.single_gpu:
        # The synthetic path always keeps its drawn GPU count
        # (jobs/workload.py:352); the paper's single-GPU runs (its
        # Philly-derived workload without --multigpu) run every job on one
        # GPU. Draw as before, keep 1, so the rest of the stream is unchanged.
        import jobs.workload as wl
        orig_demand = wl.get_job_gpu_demand

        def one_gpu():
            orig_demand()
            return 1
        wl.get_job_gpu_demand = one_gpu

    generated = []
    if args.record:
        orig_gen = Workload.generate_next_job

        def gen(self, *a, **k):
            job = orig_gen(self, *a, **k)
            generated.append(job)
            return job
        Workload.generate_next_job = gen

    def write_record():
        with open(args.record, "w") as f:
            for j in generated:  # the format of the reference's record_job (runner.py:314-316)
                f.write("{},{},{},{},{}\n".format(j.job_id, j.job_model.model_name, j.job_arrival_time,
                                                   j.job_total_iteration, j.job_gpu_demand))

    rounds = []
    if args.rounds_csv:
        orig = ScheduleEvent.handleEvent

        def handle(self):
            orig(self)
            r = ScheduleEvent.runner
            for j in self.scheduler.running_jobs:
                rounds.append((r.time, j.job_id, j.job_model.model_name,
                               " ".join(str(g.gpu_id) for g in j.gpus),
                               j.cpus, j.mem, j.synergy_speedup,
                               j.job_executed_iteration - j.last_round_progress,
                               j.job_executed_iteration, j.job_total_iteration))
        ScheduleEvent.handleEvent = handle

    sched = args.scheduler or "FIFO+fair"
    placement = "place" in sched
    fair = "fair" in sched
    tune = "tune" in sched
    opt = "opt" in sched
    random.seed(args.seed)
    start = time.time()
    r = ref.Runner(
        cluster_job_log=None,
        scheduler=sched.split("+")[0],
        jobs_per_hour=args.rate if args.rate is not None else 9.0,
        series_id_filter=(0, njobs) if args.trace else tuple(int(x) for x in args.window.split(":")),
        model_class_split=split,
        exponential=True,
        philly_arrival=False,
        multigpu=False,
        small_trace=False,
        static=args.static,
        placement=placement,
        prioritize=False,
        fair=fair,
        tune=tune,
        opt=opt,
        simulate=True,
        conn_list=None,
        config_file=args.config,
        num_jobs_default=0,
        record_trace=False,
        rec_trace_file="./record",
        trace=args.trace)
    if args.generate is not None:
        # What the runner does between generations (runner.py:347-351,
        # events/job_arrival_event.py): the clock moves to the last job's
        # arrival, which joins the class counts, then the next is drawn.
        while len(generated) < args.generate:
            j = generated[-1]
            r.set_time(j.job_arrival_time)
            r.workload.add_runnable_job(j.job_class_id)
            r.workload.generate_next_job(r.get_time())
        del generated[args.generate:]
        write_record()
        print(json.dumps({"generated": len(generated), "record": args.record}))
        return
    _, jct_series = r.run_simulation()
    wall = time.time() - start

    df = jct_series.get_df()  # columns: job id, JCT (s), as runner.finish_job records them
    arrival = {j.job_id: j.job_arrival_time for j in r.finished_jobs}
    finish = {jid: arrival[jid] + jct for jid, jct in zip(df[df.columns[0]], df[df.columns[1]])}
    out = {
        "avg_jct_s": float(df[df.columns[1]].mean()),
        "makespan_s": float(max(finish.values())) if finish else None,
        "jobs": int(len(df)),
        "jobs_in_trace": njobs if njobs is not None else len(generated) or None,
        "unfinished": len(r.runnable_jobs),
        "first_arrival_s": float(min(j.job_arrival_time for j in r.workload.jobs)) if r.workload.jobs else None,
        "sim_wall_s": round(wall, 3),
    }
    print(json.dumps(out))
    if args.record:
        write_record()

    if args.jobs_csv:
        with open(args.jobs_csv, "a", newline="") as f:
            w = csv.writer(f)
            for jid in sorted(finish):
                w.writerow([jid, repr(arrival[jid]), repr(finish[jid]), repr(finish[jid] - arrival[jid])])
    if args.rounds_csv:
        with open(args.rounds_csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["time_s", "job_id", "model", "gpu_ids", "cpus", "mem_gb", "speedup",
                        "iters_credited", "iters_done", "iters_total"])
            w.writerows(rounds)


if __name__ == "__main__":
    main()
