"""Runs Gavel's own simulator driver with cvxpy replaced by scipy's HiGHS.

    python3 scripts/gavel-reference/run.py GAVEL_SCHEDULER_DIR RESULT_JSON [DRIVER_ARGS...]

GAVEL_SCHEDULER_DIR is the scheduler/ folder of a checkout of
stanford-futuredata/gavel; DRIVER_ARGS go unchanged to its
scripts/drivers/simulate_scheduler_with_generated_jobs.py, which runs in that
folder (its default paths, e.g. simulation_throughputs.json, are relative).
Nothing of Gavel is copied or edited; before the driver runs, this script

  * puts empty stand-ins in sys.modules for the modules Gavel imports but the
    simulation never uses and that are missing here: cvxpy (the policy below
    no longer calls it), grpc and the protoc-generated *_pb2 / *_pb2_grpc rpc
    stubs (deployment only), matrix_completion (throughput estimation, only
    with --profiling_percentage < 1), psutil (process cleanup in deployment);
  * replaces MaxMinFairnessPolicyWithPerf.get_allocation (max_min_fairness_perf,
    heterogeneity-aware LAS; max_min_fairness, the agnostic one, delegates to
    it) by the same LP, built from Gavel's own helpers and solved by
    scipy.optimize.linprog(method="highs"): maximize t subject to
    t <= sum_j c_mj x_mj for every job m, with c = throughput * scale factor
    / (priority weight * proportional-share throughput); x >= 0;
    sum_j x_mj <= 1 per job; sum_m scale_factor_m x_mj <= num_workers_j per
    type; the result clipped to [0, 1] as Gavel does. HiGHS returns a vertex
    where Gavel's default ECOS (interior point) returns a spread-out optimum
    of the same value, which can change which jobs have priority 0;
  * records Scheduler.get_average_jct's value (the driver sends all output to
    /dev/null unless -v) and the LP count and time.

RESULT_JSON gets {"avg_jct_s", "avg_jct_h", "jobs", "lp_solves", "lp_s"}.
"""
import json
import os
import runpy
import sys
import time
import types


class _Stub:
    """Any attribute, call or subclassing of a stand-in module's names works."""

    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return _Stub()

    def __getattr__(self, attr):
        if attr.startswith('__'):
            raise AttributeError(attr)
        return _Stub()


def _stand_in(name):
    mod = types.ModuleType(name)

    def module_getattr(attr):
        if attr.startswith('__'):
            raise AttributeError(attr)
        return _Stub

    mod.__getattr__ = module_getattr
    return mod


def _missing(name):
    try:
        __import__(name)
        return False
    except ImportError:
        return True


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sched_dir = os.path.abspath(sys.argv[1])
    result_path = os.path.abspath(sys.argv[2])
    driver = os.path.join(sched_dir, 'scripts', 'drivers',
                          'simulate_scheduler_with_generated_jobs.py')
    if not os.path.exists(driver):
        sys.exit('gavel-reference: %s missing (not a gavel scheduler/ folder?)' % driver)

    pb2 = ['common_pb2', 'enums_pb2',
           'iterator_to_scheduler_pb2', 'iterator_to_scheduler_pb2_grpc',
           'scheduler_to_worker_pb2', 'scheduler_to_worker_pb2_grpc',
           'worker_to_scheduler_pb2', 'worker_to_scheduler_pb2_grpc']
    for name in ['cvxpy', 'grpc', 'matrix_completion', 'psutil'] + pb2:
        if name in pb2 or _missing(name):
            sys.modules[name] = _stand_in(name)

    import numpy as np
    import scipy.sparse as sp
    from scipy.optimize import linprog

    os.chdir(sched_dir)
    sys.path.insert(0, sched_dir)
    from policies import max_min_fairness
    import scheduler
    Policy = max_min_fairness.Policy  # the class Gavel's policy derives from

    stats = {'lp_solves': 0, 'lp_s': 0.0}

    def get_allocation(self, unflattened_throughputs, scale_factors,
                       unflattened_priority_weights, cluster_spec):
        # Gavel's MaxMinFairnessPolicyWithPerf.get_allocation up to the
        # cvxpy problem, unchanged.
        throughputs, index = Policy.flatten(self, unflattened_throughputs,
                                            cluster_spec)
        if throughputs is None:
            return None
        (m, n) = throughputs.shape
        (job_ids, worker_types) = index
        scale_factors_array = self.scale_factors_array(
            scale_factors, job_ids, m, n)
        priority_weights = np.array(
            [1. / unflattened_priority_weights[job_id] for job_id in job_ids])
        proportional_throughputs = self._proportional_policy.get_throughputs(
            throughputs, index, cluster_spec)
        priority_weights = np.multiply(
            priority_weights.reshape((m, 1)),
            1.0 / proportional_throughputs.reshape((m, 1)))
        coeff = np.multiply(throughputs * priority_weights.reshape((m, 1)),
                            scale_factors_array)

        # The same LP for HiGHS: variables x (m*n, row-major), then t.
        t0 = time.perf_counter()
        mn = m * n
        rows = np.repeat(np.arange(m), n)
        cols = np.arange(mn)
        # t - sum_j c_mj x_mj <= 0, one row per job.
        a_obj = sp.csr_matrix(
            (np.concatenate([-coeff.ravel(), np.ones(m)]),
             (np.concatenate([rows, np.arange(m)]),
              np.concatenate([cols, np.full(m, mn)]))), shape=(m, mn + 1))
        # sum_m sf_m x_mj <= num_workers_j, one row per type.
        a_type = sp.csr_matrix(
            (scale_factors_array.ravel(), (np.tile(np.arange(n), m), cols)),
            shape=(n, mn + 1))
        # sum_j x_mj <= 1, one row per job.
        a_job = sp.csr_matrix((np.ones(mn), (rows, cols)), shape=(m, mn + 1))
        a_ub = sp.vstack([a_obj, a_type, a_job], format='csr')
        b_ub = np.concatenate([np.zeros(m), np.asarray(self._num_workers, float),
                               np.ones(m)])
        c = np.zeros(mn + 1)
        c[mn] = -1.0
        bounds = [(0, None)] * mn + [(None, None)]
        res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method='highs')
        stats['lp_solves'] += 1
        stats['lp_s'] += time.perf_counter() - t0
        if res.status != 0:
            print('WARNING: Allocation returned by policy not optimal!')
            if res.x is None:
                raise RuntimeError('gavel-reference: HiGHS failed: %s' % res.message)
        x = res.x[:mn].reshape((m, n))
        return Policy.unflatten(self, x.clip(min=0.0).clip(max=1.0), index)

    max_min_fairness.MaxMinFairnessPolicyWithPerf.get_allocation = get_allocation

    original_average_jct = scheduler.Scheduler.get_average_jct

    def get_average_jct(self, job_ids=None, verbose=True):
        avg = original_average_jct(self, job_ids, verbose)
        done = [j for j in (job_ids if job_ids is not None
                            else self._job_completion_times)
                if self._job_completion_times.get(j) is not None]
        with open(result_path, 'w') as f:
            json.dump({'avg_jct_s': float(avg), 'avg_jct_h': float(avg) / 3600.0,
                       'jobs': len(done), 'lp_solves': stats['lp_solves'],
                       'lp_s': round(stats['lp_s'], 3)}, f)
            f.write('\n')
        return avg

    scheduler.Scheduler.get_average_jct = get_average_jct

    sys.argv = [driver] + sys.argv[3:]
    runpy.run_path(driver, run_name='__main__')


if __name__ == '__main__':
    main()
