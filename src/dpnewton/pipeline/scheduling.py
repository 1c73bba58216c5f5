"""Longest-first order of the optimizer jobs: rule ``run_job``'s ``priority:``.

Snakemake starts the ready jobs of highest priority first. With every job at the same priority the
long jobs (DP-GD at epsilon 10 with a grid extended far beyond its declared T values) may start last
and run alone while the other cores idle. Ordering the jobs longest first (the LPT rule) leaves the
short jobs for the end, where they fill the cores beside the last long one.

The cost is an **ordering heuristic, not a prediction** of the job's time: it is computed from the
job spec alone (:func:`dpnewton.pipeline.plan.expand`), before any data file exists, in
pass-equivalents x n x d (:func:`estimated_cost`). Only its order matters.
"""

from __future__ import annotations

import math

from ..data import DatasetError
from ..data.registry import get_spec
from ..experiment import MAX_ITERATIONS
from .frontier import pass_equivalents
from .jobspec import job_members, trajectories
from .schedule_model import Task, simulate

#: (n, d) of a dataset whose size neither its options nor the registry give (``custom``): the
#: synthetic dataset's default size
DEFAULT_SHAPE = (10000, 100)
#: priority steps per factor 10 of the estimated cost (100: costs 2.3 % apart get different priorities)
PRIORITY_PER_DECADE = 100
#: no optimizer job gets a priority above this (a rule meant to run before every optimizer job, such
#: as the data preparation, needs a higher one); every job gets at least 1, above the default 0
MAX_JOB_PRIORITY = 10_000


def dataset_shape(spec: dict) -> tuple[int, int]:
    """(n, d) of the job's dataset: the spec's ``dataset_options`` ``n`` and ``d`` where given (the
    synthetic dataset), else the registry's shape with default options
    (:attr:`dpnewton.data.registry.DatasetSpec.shape`), else :data:`DEFAULT_SHAPE` (per entry). A
    holdout's smaller training split is not taken into account (it scales every job of the dataset alike)."""
    try:
        shape = get_spec(spec["dataset"]).shape
    except DatasetError:
        shape = (None, None)
    options = spec.get("dataset_options") or {}
    out = []
    for key, registered, default in zip(("n", "d"), shape, DEFAULT_SHAPE):
        value = options.get(key, registered)
        out.append(int(value) if isinstance(value, (int, float)) and value >= 1 else default)
    return out[0], out[1]


def _capped_extension(ext: dict, first: float, per: float) -> int:
    """The largest T an extension rule lets the job run: its ``max_iterations``, lowered by its
    ``max_passes`` (the dataset's cap in pass-equivalents per run) as the job does it
    (:func:`dpnewton.pipeline.t_search.pass_capped`)."""
    cap = int(ext["max_iterations"])
    if "max_passes" in ext and math.isfinite(first) and math.isfinite(per) and per > 0:
        cap = min(cap, max(1, int(math.floor((float(ext["max_passes"]) - first) / per)) + 1))
    return cap


def run_values(spec: dict, longest: bool = False) -> list[int]:
    """The T values the cost counts, one per (trajectory, T) (:func:`dpnewton.pipeline.plan.trajectories`:
    one trajectory per T serves every member of a trajectory; a lockstep job runs several), sorted:
    :func:`trajectory_values` of each."""
    return sorted(T for _, Ts in _trajectory_costs(spec, longest) for T in Ts)


def trajectory_values(members: list[dict], first: float, per: float, longest: bool = False) -> list[int]:
    """The T values of one trajectory: the union of its members' grids, plus, for every member whose
    grid may be extended upwards, its cap (after its ``max_passes``, with the trajectory's pass model
    ``first``, ``per``) once, when it is above the grid; with ``longest``, every T of the extension's
    chain instead (:func:`extension_chain`: the runs of a search that extends to its cap).

    Counting the cap's run once stands for the extension's expected cost: an extension doubles (by
    the rule's ``factor``) the largest T while the best T is at the top, so the runs it adds sum to
    about the last T x factor / (factor - 1); a run that is extended at all tends to go far (DP-GD
    at epsilon 10), most are not extended and add nothing. Downward extensions (T below the grid) are
    cheap and not counted."""
    Ts: set[int] = set()
    for member in members:
        grid = [int(t) for t in member["iterations"]]
        Ts |= set(grid)
        ext = member.get("extend")
        if ext and len(grid) > 1 and ext.get("max_iterations") is not None and ext.get("factor"):
            cap = _capped_extension(ext, first, per)
            if longest:
                Ts |= set(extension_chain(max(grid), int(ext["factor"]), cap))
            elif cap > max(grid):
                Ts.add(cap)
    return sorted(Ts)


def extension_chain(top: int, factor: int, cap: int) -> list[int]:
    """The T values an upward extension from the grid's largest T ``top`` runs when its best T stays at the
    top (:func:`dpnewton.pipeline.t_search.next_extension`): top x factor^k for k >= 1, while <= ``cap`` and
    :data:`dpnewton.experiment.MAX_ITERATIONS`."""
    out, T = [], top * factor
    while factor > 1 and T <= min(cap, MAX_ITERATIONS):
        out.append(T)
        T *= factor
    return out


def _trajectory_costs(spec: dict, longest: bool = False) -> list[tuple[tuple[float, float], list[int]]]:
    """((first, per) pass model, T values) of every trajectory of the job (its first member's hyper-parameters)."""
    members = job_members(spec)
    n, d = dataset_shape(spec)
    base = spec.get("base_algorithm") or spec["algorithm"]
    out = []
    for keys in trajectories(spec).values():
        first, per = pass_equivalents(base, n, d, members[keys[0]]["hyper"])
        out.append(((first, per), trajectory_values([members[k] for k in keys], first, per, longest)))
    return out


def run_passes(first: float, per: float, T: int) -> float:
    """Passes of one run of T updates, first + (T - 1) x per; one pass for a method without a pass
    count per update (a one-shot method, whose cost is its solver's, unknown before the run, or an
    unregistered name). That undercounts a one-shot solve (a few Newton steps), whose jobs are short
    at the datasets' sizes anyway."""
    if not (math.isfinite(first) and math.isfinite(per)):
        return 1.0
    return first + (T - 1) * per


def estimated_cost(spec: dict, longest: bool = False) -> float:
    """The job's cost in pass-equivalents x n x d x seeds: the passes of every run of every trajectory
    (:func:`run_values`, :func:`run_passes` with :func:`dpnewton.pipeline.frontier.pass_equivalents` of the
    base algorithm and the trajectory's hyper-parameters), times n x d of the dataset (:func:`dataset_shape`),
    times the number of seeds; with ``longest``, of the runs of a T search that extends every grid to its
    cap (:func:`trajectory_values`). An ordering heuristic, not a prediction (module docstring): a lockstep
    job's wide batches cost less per run than this counts."""
    n, d = dataset_shape(spec)
    passes = sum(run_passes(first, per, T) for (first, per), Ts in _trajectory_costs(spec, longest) for T in Ts)
    return passes * n * d * max(1, len(spec.get("seeds") or []))


def priority(spec: dict) -> int:
    """The job's priority: :data:`PRIORITY_PER_DECADE` x log10 of :func:`estimated_cost`, rounded, in
    [1, :data:`MAX_JOB_PRIORITY`] (an int: Snakemake's schedulers take an int or a float; above the
    other rules' default 0)."""
    cost = estimated_cost(spec)
    if not (cost > 0 and math.isfinite(cost)):
        return 1
    return int(min(MAX_JOB_PRIORITY, max(1, round(PRIORITY_PER_DECADE * math.log10(cost)))))


#: a run job's fixed seconds (start-up, reading the data): below the claims run's median job wall (4.8 s)
JOB_START_S = 3.0
#: seconds of a run job per unit of :func:`estimated_cost`, fitted to the claims run (config/claims.yaml,
#: figures/claims/resources.csv): (31,669 s of summed wall of its 755 run jobs - 755 x :data:`JOB_START_S`)
#: / 1.311e15, their summed cost. A machine of another speed scales it
SECONDS_PER_COST = 2.24e-11


#: seconds of one pass-equivalent over an n x d matrix, per n x d, in a lone run on one BLAS thread: the 90th
#: percentile over the claims run's timed configurations x datasets (figures/claims/update_costs.csv: the
#: timing stage's seconds per update / (its card's passes per update x n x d); median 1.57e-10, range
#: 4.5e-11 to 2.4e-10). A lockstep batch costs at most about this per run
SECONDS_PER_PASS_ND = 2.1e-10


def longest_seconds(spec: dict) -> float:
    """The job's seconds if every T search in it extends its grid to the cap (:func:`estimated_cost` with
    ``longest``) at :data:`SECONDS_PER_PASS_ND`, plus :data:`JOB_START_S`: what a job of the plan may take at
    worst, the length :mod:`.job_split` bounds. The claims run's DP-GD job on adult at epsilon 10 (6
    trajectories extended to T = 76,800) took 48.4 min against 61 min by this bound and 3.3 min by
    :func:`estimated_seconds` (docs/pipeline.md, Job granularity)."""
    return JOB_START_S + SECONDS_PER_PASS_ND * estimated_cost(spec, longest=True)


def estimated_seconds(spec: dict) -> float:
    """A rough wall-time estimate of the job: :func:`cost_seconds` of its :func:`estimated_cost`. The cost
    model orders jobs; as a duration it is a guide (a factor of about 2 either way per job), enough to tell
    minutes from hours before a run."""
    return cost_seconds(estimated_cost(spec))


def cost_seconds(cost: float) -> float:
    """Estimated seconds of a job of cost ``cost``: :data:`JOB_START_S` + :data:`SECONDS_PER_COST` x ``cost``."""
    return JOB_START_S + SECONDS_PER_COST * cost


def makespan(seconds: list[float], cores: int) -> float:
    """The length of a run of independent one-core jobs of the given durations on ``cores`` cores, longest
    first (the order :func:`priority` gives; :func:`dpnewton.pipeline.schedule_model.simulate`)."""
    tasks = [Task(str(i), s, priority=s) for i, s in enumerate(seconds)]
    return simulate(tasks, max(1, int(cores))).makespan


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def plan_lines(plan, cores: int | None, done=lambda job: False, unit: str = "core") -> list[str]:
    """What a run of ``plan`` will do, for the console before the first job (and in a dry run): the
    datasets dropped and why (the plan's warnings), the optimizer jobs, and the estimated duration of
    those not ``done`` on ``cores`` (1 when not given; ``unit`` names them: a cluster run's job slots)
    by :func:`estimated_seconds` and :func:`makespan`, with the longest job's and the longest case of any job
    (:func:`longest_seconds`)."""
    lines = [f"WARNING: {w}" for w in plan.warnings]
    pending = [j for j in plan.jobs if not done(j)]
    seconds = [estimated_seconds(j.spec) for j in pending]
    on = f"on {cores} {unit}{'s' if cores > 1 else ''}" if cores else f"on 1 {unit} (none given)"
    kept = ", ".join(plan.datasets)
    lines.append(f"datasets: {kept}" + (f" (dropped: {', '.join(plan.dropped)})" if plan.dropped else ""))
    if not pending:
        lines.append(f"optimizer jobs: all {len(plan.jobs)} done")
    else:
        lines.append(f"optimizer jobs: {len(pending)} to run of {len(plan.jobs)}; estimated "
                     f"{_duration(makespan(seconds, cores or 1))} {on} "
                     f"({_duration(sum(seconds))} summed, longest job {_duration(max(seconds))}, at most "
                     f"{_duration(max(longest_seconds(j.spec) for j in pending))} if its T searches extend to their "
                     f"caps; "
                     f"the scheduler's cost model, a rough guide; "
                     f"tracks, timing stage and figures not counted)")
    return lines
