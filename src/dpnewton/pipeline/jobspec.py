"""The typed job spec: what the plan (:mod:`.plan`) hands to a run job (:mod:`.jobs`), checked on both sides.

A job spec has one of three shapes, as :func:`~.plan.expand` builds them:

* ``single``: one configuration at one (conversion, epsilon);
* ``shared``: configurations that differ only in ``average`` (:func:`~.plan.share_trajectories`), one
  trajectory, every released model; the top-level ``hyper`` is theirs without ``average``;
* ``grouped``: every configuration x conversion x epsilon of one dataset, seed chunk and registered
  algorithm (:func:`~.plan.group_jobs`), members keyed ``<configuration>/<conversion>/eps~<epsilon>``.

Snakemake ``params`` carry the serialised form (:meth:`JobSpec.to_dict`, JSON-able), which
:meth:`JobSpec.from_dict` reads back exactly (``from_dict(d).to_dict() == d``); that dict is what
``config_hash`` hashes, so a job's hash is that of its serialised spec. ``from_dict`` refuses a missing or
unknown key, and a value of the wrong type, naming the key and the valid names.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from numbers import Real

from .labels import eps_label

#: keys of every serialised spec, and those present only when not the default (holdout on, float32)
COMMON_KEYS = ("dataset", "dataset_options", "algorithm", "base_algorithm", "delta", "seeds")
OPTIONAL_KEYS = ("holdout", "precision")
#: the cell of a single or shared spec (the configuration's conversion and epsilon)
CELL_KEYS = ("conversion", "primary", "epsilon", "eps_label", "curves_max_points")
SHAPE_KEYS = {
    "single": COMMON_KEYS + CELL_KEYS + ("hyper", "iterations", "extend"),
    "shared": COMMON_KEYS + CELL_KEYS + ("hyper", "members"),
    "grouped": COMMON_KEYS + ("grouped", "members", "curves_max_points"),
}
#: keys of a member of a shared spec, and of a grouped one (a whole cell)
SHARED_MEMBER_KEYS = ("average", "hyper", "iterations", "extend")
MEMBER_KEYS = ("algorithm",) + CELL_KEYS + SHARED_MEMBER_KEYS
EXTEND_KEYS = ("factor", "max_iterations", "probe_first_seed", "max_passes")


class JobSpecError(ValueError):
    """A serialised job spec that is not one :func:`~.plan.expand` builds."""


def _check_keys(where: str, given: dict, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
    if not isinstance(given, dict):
        raise JobSpecError(f"job spec {where}: {given!r} is not a mapping")
    unknown = sorted(set(given) - set(required) - set(optional))
    missing = [k for k in required if k not in given]
    if unknown or missing:
        what = "; ".join(([f"unknown key(s) {unknown}"] if unknown else []) + ([f"missing key(s) {missing}"]
                                                                               if missing else []))
        raise JobSpecError(f"job spec {where}: {what}; the valid keys are {', '.join(required + optional)} "
                           "(build the spec with dpnewton.pipeline.plan.expand)")


def _int_list(where: str, value, minimum: int) -> tuple[int, ...]:
    if not (isinstance(value, (list, tuple)) and value
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= minimum for v in value)):
        raise JobSpecError(f"job spec {where}: {value!r} must be a non-empty list of integers >= {minimum}")
    return tuple(value)


def _typed(where: str, value, kind, name: str):
    if not isinstance(value, kind) or isinstance(value, bool) is not (kind is bool):
        raise JobSpecError(f"job spec {where}: {value!r} must be {name}")
    return value


@dataclass(frozen=True)
class Member:
    """One configuration at one (conversion, epsilon) a job releases models for: its own T grid
    (``iterations``) and extension rule (``extend``, None: none); ``hyper`` with its ``average``."""

    algorithm: str
    conversion: str
    primary: bool
    epsilon: float
    eps_label: str
    curves_max_points: int
    hyper: dict
    iterations: tuple[int, ...]
    extend: dict | None

    @property
    def average(self) -> str:
        return self.hyper.get("average", "none")

    @property
    def trajectory(self) -> str:
        """``<conversion>/eps~<epsilon>/<hyper-parameters but average, as JSON>``: members with the same
        one share their runs (one trajectory per (seed, T) releases each member's model)."""
        hyper = {k: v for k, v in self.hyper.items() if k != "average"}
        return f"{self.conversion}/eps~{self.eps_label}/{json.dumps(hyper, sort_keys=True, default=str)}"

    def to_dict(self) -> dict:
        return {"algorithm": self.algorithm, "conversion": self.conversion, "primary": self.primary,
                "epsilon": self.epsilon, "eps_label": self.eps_label, "curves_max_points": self.curves_max_points,
                "average": self.average, "hyper": dict(self.hyper), "iterations": list(self.iterations),
                "extend": None if self.extend is None else dict(self.extend)}

    @classmethod
    def from_dict(cls, where: str, m: dict) -> Member:
        _check_keys(where, m, MEMBER_KEYS)
        epsilon = m["epsilon"]
        if not (isinstance(epsilon, Real) and not isinstance(epsilon, bool) and math.isfinite(epsilon)):
            raise JobSpecError(f"job spec {where}.epsilon: {epsilon!r} must be a finite number")
        if m["eps_label"] != eps_label(epsilon):
            raise JobSpecError(f"job spec {where}.eps_label: {m['eps_label']!r} is not the label of epsilon "
                               f"{epsilon!r} ({eps_label(epsilon)!r})")
        hyper = _typed(f"{where}.hyper", m["hyper"], dict, "a mapping")
        if m["average"] != hyper.get("average", "none"):
            raise JobSpecError(f"job spec {where}.average: {m['average']!r} is not hyper's average "
                               f"({hyper.get('average', 'none')!r})")
        extend = m["extend"]
        if extend is not None:
            _check_keys(f"{where}.extend", extend, ("factor", "max_iterations"), EXTEND_KEYS[2:])
        points = _typed(f"{where}.curves_max_points", m["curves_max_points"], int, "an integer >= 0")
        if points < 0:
            raise JobSpecError(f"job spec {where}.curves_max_points: {points!r} must be an integer >= 0")
        return cls(_typed(f"{where}.algorithm", m["algorithm"], str, "a configuration name"),
                   _typed(f"{where}.conversion", m["conversion"], str, "a conversion name"),
                   _typed(f"{where}.primary", m["primary"], bool, "true or false"), float(epsilon),
                   m["eps_label"], points, dict(hyper), _int_list(f"{where}.iterations", m["iterations"], 1),
                   None if extend is None else dict(extend))


@dataclass(frozen=True)
class JobSpec:
    """Everything that determines a job's rows (module docstring): the dataset and its options, the
    registered algorithm, delta (None: the relation's default), the seeds, the members keyed as the job
    names them, and ``holdout`` / ``precision`` (None: off / float64, absent from the serialised form)."""

    shape: str
    dataset: str
    dataset_options: dict
    base_algorithm: str
    delta: float | None
    seeds: tuple[int, ...]
    members: dict[str, Member]
    holdout: float | None = None
    precision: str | None = None

    @property
    def algorithm(self) -> str:
        """The job's name: its first member's configuration."""
        return next(iter(self.members.values())).algorithm

    @property
    def curves_max_points(self) -> int:
        """The members' largest: whether the job stores curves."""
        return max(m.curves_max_points for m in self.members.values())

    def trajectories(self) -> dict[str, list[str]]:
        """{trajectory: the keys of the members that share it} (:attr:`Member.trajectory`)."""
        out: dict[str, list[str]] = {}
        for key, m in self.members.items():
            out.setdefault(m.trajectory, []).append(key)
        return out

    def to_dict(self) -> dict:
        """The serialised spec (JSON-able; module docstring)."""
        first = next(iter(self.members.values()))
        out = {"dataset": self.dataset, "dataset_options": dict(self.dataset_options), "algorithm": self.algorithm,
               "base_algorithm": self.base_algorithm, "delta": self.delta, "seeds": list(self.seeds)}
        if self.shape == "grouped":
            out.update(grouped=True, members={k: m.to_dict() for k, m in self.members.items()},
                       curves_max_points=self.curves_max_points)
        else:
            out.update({k: getattr(first, k) for k in CELL_KEYS})
            if self.shape == "single":
                out.update(hyper=dict(first.hyper), iterations=list(first.iterations),
                           extend=None if first.extend is None else dict(first.extend))
            else:
                out["hyper"] = {k: v for k, v in first.hyper.items() if k != "average"}
                out["members"] = {k: {f: m.to_dict()[f] for f in SHARED_MEMBER_KEYS}
                                  for k, m in self.members.items()}
        if self.holdout is not None:
            out["holdout"] = self.holdout
        if self.precision is not None:
            out["precision"] = self.precision
        return out

    @classmethod
    def from_dict(cls, spec: dict) -> JobSpec:
        """The spec a serialised one describes; :class:`JobSpecError` naming the key otherwise."""
        if not isinstance(spec, dict):
            raise JobSpecError(f"job spec: {spec!r} is not a mapping")
        shape = "grouped" if "grouped" in spec else "shared" if "members" in spec else "single"
        _check_keys(f"({shape})", spec, SHAPE_KEYS[shape], OPTIONAL_KEYS)
        if shape == "grouped":
            if spec["grouped"] is not True:
                raise JobSpecError(f"job spec grouped: {spec['grouped']!r} must be true (or absent)")
            members = {k: Member.from_dict(f"members.{k}", m) for k, m in _members(spec).items()}
            for key, m in members.items():
                if key != f"{m.algorithm}/{m.conversion}/eps~{m.eps_label}":
                    raise JobSpecError(f"job spec members.{key}: a grouped job's member is keyed "
                                       f"<configuration>/<conversion>/eps~<epsilon>")
        else:
            cell = {k: spec[k] for k in CELL_KEYS}
            if shape == "single":
                raw = {spec["algorithm"]: {"algorithm": spec["algorithm"], **cell,
                                           "average": _hyper(spec).get("average", "none"),
                                           **{k: spec[k] for k in ("hyper", "iterations", "extend")}}}
            else:
                raw = {}
                for name, m in _members(spec).items():
                    _check_keys(f"members.{name}", m, SHARED_MEMBER_KEYS)
                    raw[name] = {"algorithm": name, **cell, **m}
            members = {k: Member.from_dict(f"members.{k}" if shape == "shared" else "(single)", m)
                       for k, m in raw.items()}
            shared = {k: v for k, v in _hyper(spec).items() if k != "average"}
            if shape == "shared" and ("average" in spec["hyper"] or any(
                    {k: v for k, v in m.hyper.items() if k != "average"} != shared for m in members.values())):
                raise JobSpecError("job spec hyper: a shared job's hyper is its members' without average")
        out = cls(shape, _typed("dataset", spec["dataset"], str, "a dataset name"),
                  dict(_typed("dataset_options", spec["dataset_options"], dict, "a mapping")),
                  _typed("base_algorithm", spec["base_algorithm"], str, "a registered algorithm"),
                  _delta(spec["delta"]), _int_list("seeds", spec["seeds"], 0), members,
                  spec.get("holdout"), spec.get("precision"))
        if out.algorithm != spec["algorithm"]:
            raise JobSpecError(f"job spec algorithm: {spec['algorithm']!r} is not its first member's "
                               f"({out.algorithm!r})")
        if shape != "single" and spec.get("curves_max_points") != out.curves_max_points:
            raise JobSpecError(f"job spec curves_max_points: {spec['curves_max_points']!r} is not the members' "
                               f"largest ({out.curves_max_points})")
        return out


def _members(spec: dict) -> dict:
    members = spec["members"]
    if not isinstance(members, dict) or not members:
        raise JobSpecError(f"job spec members: {members!r} must be a non-empty mapping")
    return members


def _hyper(spec: dict) -> dict:
    return _typed("hyper", spec["hyper"], dict, "a mapping")


def _delta(delta):
    if delta is not None and (not isinstance(delta, Real) or isinstance(delta, bool)):
        raise JobSpecError(f"job spec delta: {delta!r} must be a number or null (the relation's default)")
    return delta


def as_job_spec(spec: JobSpec | dict) -> JobSpec:
    """``spec`` itself, or the spec its serialised form describes (:meth:`JobSpec.from_dict`)."""
    return spec if isinstance(spec, JobSpec) else JobSpec.from_dict(spec)


def job_members(spec: JobSpec | dict) -> dict[str, dict]:
    """The configurations a job's runs release models for, serialised: {member key: {'algorithm' (the
    configuration), 'conversion', 'primary', 'epsilon', 'eps_label', 'curves_max_points', 'average',
    'hyper', 'iterations', 'extend'}}, keyed by configuration name (single and shared jobs) or
    ``<configuration>/<conversion>/eps~<epsilon>`` (grouped jobs)."""
    return {k: m.to_dict() for k, m in as_job_spec(spec).members.items()}


def trajectories(spec: JobSpec | dict) -> dict[str, list[str]]:
    """{trajectory: the keys of the members that share it} (:meth:`JobSpec.trajectories`)."""
    return as_job_spec(spec).trajectories()


def job_description(spec: JobSpec | dict) -> str:
    """What a job runs, for its Snakemake message: its dataset, configurations, epsilons and conversions."""
    spec = as_job_spec(spec)

    def listed(values) -> str:
        return ", ".join(dict.fromkeys(str(v) for v in values))

    members = spec.members.values()
    return (f"{listed(m.algorithm for m in members)} on {spec.dataset}, "
            f"eps={listed(m.eps_label for m in members)} ({listed(m.conversion for m in members)})")
