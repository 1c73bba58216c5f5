"""How long a grouped job may be (config key ``job_split``): wide batches on few cores, short jobs on many.

A grouped job (:func:`.plan.group_jobs`) runs every configuration x conversion x epsilon of one dataset,
seed chunk and lockstep algorithm (with ``job_grouping: algorithm``, of any algorithm): its runs step
together in wide batches, which cost less per run (docs/pipeline.md, Job granularity), but it is one long
job. A run of jobs of summed cost C on S job slots lasts at least max(C / S, p_max), p_max its longest job,
and list scheduling (Snakemake starts the ready jobs by priority) ends by C / S + p_max (Graham 1969). On
few slots C / S is large and wide jobs cost nothing in length; on many, p_max sets the length. So:

* ``wide``: no group is split;
* ``auto`` (the default): a job may take at most max(:data:`SHARE` x C / S, p_cell) seconds, with
  C the summed estimated seconds (:func:`.scheduling.estimated_seconds`) of the plan's run jobs before any
  split, done or not, S the workflow's ``--cores`` (a cluster executor: its ``--jobs``) and p_cell the
  longest cell job's longest seconds (a trajectory, which no split shortens: no run is shorter than it, so
  no job needs to be); without S (the plan built outside a workflow) no group is split. The run then lasts
  at most about (1 + :data:`SHARE`) x max(C / S, p_cell) by the bound above, and a group that could not
  lengthen it beyond that keeps its wide batches;
* a number: a job may take at most that many seconds.

A job's length is bounded by its longest seconds (:func:`.scheduling.longest_seconds`: every T search in it
extended to its cap, at a lone run's cost per pass), not by its estimated seconds: an extension that runs to
the cap takes about 100 times a grid's runs, and the cost model cannot know before the run which will (the
claims run's DP-GD job on adult at epsilon 10 took 48.4 min where its estimate said 3.3). A group over the
bound is split (:func:`split_group`): its epsilons are packed into the fewest jobs within the bound; an
epsilon over the bound alone is packed, in the same way, from its trajectories (each a cell job: a
configuration at one conversion, with the configurations that share its runs); a trajectory over the bound
stays one job (its seeds run one T search: ``seeds_per_job`` splits them, into searches of their own).
Packing is LPT: units largest first, each onto the lightest job, with the fewest jobs that keep every job
of more than one unit within the bound. Each job keeps its cells in config order and is named by its first
(:func:`.plan.merged_job`), a job of one cell being that cell's own job (spec, hash, name). Every run keeps
its own generator, seeded from its identity, so its rows do not depend on the split but through the width
of its batch (docs/pipeline.md, Job granularity).
"""

from __future__ import annotations

import math
from numbers import Real

from .scheduling import JOB_START_S, cost_seconds, estimated_cost, longest_seconds

#: the longest job's longest case as a share of C / S under ``auto`` (module docstring): on 2 cores
#: config/claims.yaml keeps 750 of its 755 wide jobs (5 split into 15), and on 16 or more every trajectory is a job
SHARE = 0.5
#: ``job_split`` where the config does not set it (no schema default: a default filled into the config would
#: change the config hash of every config written before the key)
DEFAULT = "auto"
#: the job slots of the workflow's main process, passed on to the jobs it spawns (a cluster job parses the
#: workflow again, with its own --cores, and must build the same plan)
SLOTS_VARIABLE = "DPNEWTON_JOB_SLOTS"


def setting_of(cfg: dict):
    """The config's ``job_split`` (:data:`DEFAULT` when absent)."""
    return cfg.get("job_split", DEFAULT)


def max_job_seconds(setting, group_seconds: list[float], cell_seconds: float, slots: int | None) -> float:
    """The bound on a job's longest seconds (module docstring) for ``job_split: setting``, the estimated
    seconds of each group before any split, the largest longest seconds of a cell job and ``slots`` job slots
    (None: not known); ``math.inf``: no split."""
    if setting == "wide" or (setting == "auto" and not slots):
        return math.inf
    if setting == "auto":
        return max(SHARE * sum(group_seconds) / int(slots), cell_seconds)
    if isinstance(setting, Real) and not isinstance(setting, bool) and setting > 0:
        return float(setting)
    raise ValueError(f"config key job_split: {setting!r} is not auto, wide or a number of seconds > 0")


def split_groups(groups: list[list], setting, slots: int | None) -> list[list]:
    """The plan's groups of cell jobs (:func:`.plan.job_groups`) after ``job_split: setting`` on ``slots``
    job slots (module docstring), each split group's parts in its place."""
    expected = [cost_seconds(sum(estimated_cost(job.spec) for job in group)) for group in groups]
    longest = {job.key: longest_seconds(job.spec) - JOB_START_S for group in groups for job in group}
    bound = max_job_seconds(setting, expected, JOB_START_S + max(longest.values(), default=0.0), slots)
    if not math.isfinite(bound):
        return groups
    return [part for group in groups for part in split_group(group, longest, bound - JOB_START_S)]


def pack(units: list[list], weight, bound: float) -> list[list]:
    """The fewest parts of ``units`` (lists of cells; ``weight`` of a unit) whose parts of more than one
    unit weigh at most ``bound``, by LPT (module docstring); each part's cells in their order in ``units``."""
    weights = [weight(unit) for unit in units]
    order = sorted(range(len(units)), key=lambda i: (-weights[i], i))
    # no fewer parts: one per unit over the bound, the others' weight over the bound
    over = [w for w in weights if w > bound]
    rest = sum(weights) - sum(over)
    first = len(units) if bound <= 0 else min(len(units), max(1, len(over) + math.ceil(rest / bound)))
    for k in range(first, len(units) + 1):
        loads, parts = [0.0] * k, [[] for _ in range(k)]
        for i in order:
            j = loads.index(min(loads))
            loads[j] += weights[i]
            parts[j].append(i)
        if all(load <= bound or len(part) == 1 for load, part in zip(loads, parts)):
            break
    return [[c for i in sorted(part) for c in units[i]] for part in sorted(filter(None, parts), key=min)]


def split_group(cells: list, costs: dict[tuple, float], bound: float) -> list[list]:
    """The jobs one group's cell jobs ``cells`` (config order; ``costs`` by key) become under ``bound``
    (module docstring): packed by epsilon, an epsilon over the bound by trajectory (one cell job each)."""
    weight = lambda unit: sum(costs[c.key] for c in unit)  # noqa: E731
    if weight(cells) <= bound:
        return [cells]
    by_eps: dict[str, list] = {}
    for c in cells:
        by_eps.setdefault(c.eps, []).append(c)
    over = [part for part in by_eps.values() if weight(part) > bound]
    parts = pack([part for part in by_eps.values() if weight(part) <= bound], weight, bound)
    for part in over:
        parts += pack([[c] for c in part], weight, bound)
    place = {c.key: i for i, c in enumerate(cells)}
    return sorted(parts, key=lambda part: place[part[0].key])


def resolve_slots(setting, main: bool, slots: int | None, environ) -> int | None:
    """The job slots the plan is sized for: in the workflow's main process ``slots`` (--cores, or a
    cluster's --jobs), also written to ``environ[SLOTS_VARIABLE]`` for the jobs it spawns; in a spawned job
    the main process's from ``environ``. A spawned job without it under ``auto`` cannot know the plan its
    name comes from: ValueError naming the fix."""
    if main:
        if slots:
            environ[SLOTS_VARIABLE] = str(int(slots))
        return slots
    value = environ.get(SLOTS_VARIABLE)
    if value:
        return int(value)
    if setting == "auto":
        raise ValueError(f"config key job_split: auto sizes the jobs for the main process's cores, and this job "
                         f"did not get them ({SLOTS_VARIABLE} is not set: an executor that does not pass the "
                         f"environment on); set job_split to wide or to a number of seconds")
    return None
