"""A model of Snakemake's local scheduler: jobs of known durations replayed on a number of cores.

Snakemake's greedy scheduler (``scheduler: greedy`` in the profiles; ``snakemake.scheduling.greedy``)
starts, whenever jobs end, the ready jobs (every job they need done) by reward, highest first, each one
whose threads fit in the free cores; the reward is (priority, summed input size), and a job's threads are
capped at the cores. :func:`simulate` does the same with given durations, ties in the order given. A job
takes its duration whatever runs beside it (a model: on a real machine jobs share memory bandwidth).

A schedule's length on C cores is at least max(the longest chain of jobs that need one another, the
summed job-seconds x threads / C) (:attr:`Schedule.lower_bound`); its utilisation is the summed
job-seconds x threads over C x its length.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    """One job: its ``name``, duration ``seconds``, ``priority``, ``threads``, the names of the jobs it
    needs (``after``) and the summed size of its inputs (``size``, the scheduler's tie-break)."""

    name: str
    seconds: float
    priority: float = 0.0
    threads: int = 1
    after: tuple[str, ...] = ()
    size: float = 0.0


@dataclass(frozen=True)
class Schedule:
    """A simulated run: its ``cores``, ``makespan``, every job's ``start``, the ``utilisation``, the longest
    job (``longest_job``: name, seconds), the longest chain (``chain``: names, ``chain_seconds``) and
    ``lower_bound`` = max(chain_seconds, summed job-seconds x threads / cores)."""

    cores: int
    makespan: float
    start: dict[str, float]
    utilisation: float
    longest_job: tuple[str, float]
    chain: tuple[str, ...]
    chain_seconds: float
    lower_bound: float


def _checked(tasks: list[Task]) -> dict[str, Task]:
    by_name = {t.name: t for t in tasks}
    if len(by_name) != len(tasks):
        raise ValueError("schedule model: two jobs have one name; give every job its own")
    for t in tasks:
        missing = [a for a in t.after if a not in by_name]
        if missing:
            raise ValueError(f"schedule model: job {t.name!r} needs {missing}, which are not jobs of the run")
        if not t.seconds >= 0 or t.threads < 1:
            raise ValueError(f"schedule model: job {t.name!r} has {t.seconds} s and {t.threads} threads; "
                             "give a duration >= 0 and at least one thread")
    return by_name


def _needed_by(tasks: list[Task]) -> dict[str, list[str]]:
    """Job name -> the names of the jobs that need it."""
    out: dict[str, list[str]] = {}
    for t in tasks:
        for a in set(t.after):
            out.setdefault(a, []).append(t.name)
    return out


def _topological(tasks: list[Task]) -> list[Task]:
    by_name = _checked(tasks)
    waiting = {t.name: len(set(t.after)) for t in tasks}
    needed_by = _needed_by(tasks)
    order = [t for t in tasks if not waiting[t.name]]
    for t in order:                                   # grows while it is read
        for name in needed_by.get(t.name, []):
            waiting[name] -= 1
            if not waiting[name]:
                order.append(by_name[name])
    if len(order) != len(tasks):
        raise ValueError("schedule model: the jobs' dependencies form a cycle")
    return order


def longest_chain(tasks: list[Task]) -> tuple[float, tuple[str, ...]]:
    """(seconds, names) of the longest chain of jobs each of which needs the one before: no schedule on any
    number of cores is shorter."""
    finish: dict[str, tuple[float, tuple[str, ...]]] = {}
    for t in _topological(tasks):
        before = max((finish[a] for a in t.after), default=(0.0, ()), key=lambda f: f[0])
        finish[t.name] = (before[0] + t.seconds, before[1] + (t.name,))
    return max(finish.values(), default=(0.0, ()), key=lambda f: f[0])


def simulate(tasks: list[Task], cores: int) -> Schedule:
    """The run of ``tasks`` on ``cores`` cores as Snakemake's greedy scheduler starts them (module docstring)."""
    cores = int(cores)
    if cores < 1:
        raise ValueError(f"schedule model: {cores} cores; give at least 1")
    by_name = _checked(tasks)
    chain_seconds, chain = longest_chain(tasks)
    rank = {t.name: (-t.priority, -t.size, i) for i, t in enumerate(tasks)}
    threads = {t.name: min(t.threads, cores) for t in tasks}
    waiting = {t.name: set(t.after) for t in tasks}
    needed_by = _needed_by(tasks)
    ready = sorted((t.name for t in tasks if not t.after), key=rank.__getitem__)
    running: list[tuple[float, int, str]] = []
    start: dict[str, float] = {}
    now, free = 0.0, cores
    while ready or running:
        for name in list(ready):                      # highest reward first, each one that fits
            if threads[name] <= free:
                ready.remove(name)
                start[name] = now
                free -= threads[name]
                heapq.heappush(running, (now + by_name[name].seconds, rank[name][2], name))
        if not running:
            break
        now = running[0][0]
        while running and running[0][0] == now:       # every job that ends now, before the next start
            _, _, name = heapq.heappop(running)
            free += threads[name]
            for later in needed_by.get(name, []):
                waiting[later].discard(name)
                if not waiting[later]:
                    ready.append(later)
        ready.sort(key=rank.__getitem__)
    work = sum(t.seconds * threads[t.name] for t in tasks)
    longest = max(tasks, key=lambda t: t.seconds, default=Task("", 0.0))
    return Schedule(cores, now, start, work / (cores * now) if now > 0 else 0.0, (longest.name, longest.seconds),
                    chain, chain_seconds, max(chain_seconds, work / cores))
