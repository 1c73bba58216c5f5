"""Command line: ``dpnewton run | predict | prepare | optimum | floor | conversions | audit``.

Errors in the arguments or the data end the command with exit status 2 and a one-line message
(no traceback); so does a package of the ``benchmark`` extra that a command needs and that is not
installed (pandas, to read the covertype and protein files): the message names the install command.
"""

# Subcommands import their heavy modules on use (inside each _cmd_*), to keep `dpnewton --help` fast.
from __future__ import annotations

import argparse
import dataclasses
import errno
import os
import re
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from . import __version__
from .api import EVALUATION_FIELDS
from .algorithms import get_algorithm
from .benchmark_extra import missing_message, missing_module
from .experiment import DEFAULT_CONVERSION, check_guarantee, check_run, result_record, run_algorithm
from .floor import SHORT_LABEL, dataset_floor
from .io import to_json
from .loss import PRECISIONS
from .model import SUFFIXES, LinearModel
from .privacy import CONVERSIONS, check_epsilon_delta, epsilon_to_rho
from .privacy.neighbouring import BENCHMARK_RELATION, LIBRARY_DELTA, LIBRARY_RELATION, RELATIONS, resolve_delta
from .privacy.release import released_record

DATASET_CACHE_DIR = "resources/data"
"""Where ``dpnewton run --dataset`` caches a named dataset's prepared copy and optimum."""


def _hyper_value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def _parse_hyper(items: list[str]) -> dict:
    hyper = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--hyper {item!r} must look like KEY=VALUE")
        key, value = item.split("=", 1)
        hyper[key.replace("-", "_")] = _hyper_value(value)
    return hyper


#: what a --hyper value of each annotated type must look like
_HYPER_KINDS = {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a word"}


def _check_hyper_types(algorithm: str, hyper: dict) -> None:
    """A --hyper value of the wrong type for its configuration field (read off the field's annotation) is a
    ValueError naming the key and the type; unknown keys and values the configuration rejects are
    :func:`~dpnewton.experiment.check_run`'s."""
    found = get_algorithm(algorithm).config
    if found is None:
        return
    cls, _ = found
    types = {f.name: f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
             for f in dataclasses.fields(cls)}
    for key, value in hyper.items():
        kinds = [k for k in _HYPER_KINDS if k in re.findall(r"\w+", types.get(key, ""))]
        if not kinds:
            continue  # unknown key (build_config names it) or a type the command line cannot spell
        fits = {"bool": isinstance(value, bool),
                "int": isinstance(value, int) and not isinstance(value, bool),
                "float": isinstance(value, (int, float)) and not isinstance(value, bool),
                "str": isinstance(value, str)}
        if not any(fits[k] for k in kinds):
            raise ValueError(f"--hyper {key}={value}: {algorithm}'s {key} takes "
                             f"{' or '.join(_HYPER_KINDS[k] for k in kinds)} ({types[key]}), not {value!r}")


#: bytes a run allocates per iteration: excess losses, update times, the loss curve (float64) and
#: the loss mask (bool) of iterates 0..T (dpnewton.algorithms.base)
RUN_BYTES_PER_ITERATION = 3 * 8 + 1


def _run_bytes(algorithm: str, iterations: int, n: int = 0, d: int = 0) -> int:
    """Memory a run of T iterations allocates beyond the data: the per-iteration records, the averaging
    sums of w and Z w (d + n floats) and, for methods whose card keeps every iterate (``kept_iterates``),
    those ((T+1) x d floats)."""
    kept = get_algorithm(algorithm).kept_iterates
    return (iterations + 1) * (RUN_BYTES_PER_ITERATION + (8 * d if kept else 0)) + 8 * (n + d)


def _check_run_memory(algorithm: str, iterations: int, n: int = 0, d: int = 0) -> None:
    """Refuse (ValueError with the estimate) a run whose T-dependent buffers exceed the memory budget."""
    from .data.validate import check_memory

    if not get_algorithm(algorithm).iterative:
        return  # one-shot methods ignore T
    check_memory(_run_bytes(algorithm, iterations, n, d),
                 f"-T {iterations}: a {algorithm} run of {iterations} iterations" + (f" on d={d}" if d else ""),
                 "use a smaller -T", error=ValueError)


def _check_writable(path: str, option: str) -> None:
    """Refuse an output file that cannot be created, before any work: its folder must exist and take a
    new file (tried with an empty temporary file, removed at once)."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise ValueError(f"{option} {path} is a directory; give a file name in it, e.g. {target / 'model.json'}")
    folder = target.parent
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise ValueError(f"{option} {path}: {existing} is a file, not a folder; choose a path in an existing folder")
    if existing != folder:
        raise ValueError(f"{option} {path}: the folder {folder} does not exist; create it first (mkdir -p {folder})")
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".probe")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ValueError(f"{option} {path}: cannot create a file in {folder} ({exc.strerror}); "
                         "choose a folder you can write to") from None


def _os_error_message(exc: OSError) -> str:
    """One line for an operating-system error: the file, what went wrong, the fix."""
    where = f"{exc.filename}: " if exc.filename else ""
    if isinstance(exc, PermissionError):
        fix = "check the permissions of that path (or choose another one)"
    elif isinstance(exc, IsADirectoryError):
        fix = "it is a directory: pass a file"
    elif isinstance(exc, NotADirectoryError):
        fix = "a part of the path is a file, not a folder: fix the path"
    elif exc.errno == errno.ENOSPC:
        fix = "free disk space or choose another --cache-dir"
    elif exc.errno == errno.EPIPE:
        fix = "the output was closed before the command finished"
    else:
        fix = "check the path and the disk"
    return f"{where}{exc.strerror or exc}; {fix}"


def _cmd_run(args) -> int:
    # imported on use: dpnewton.problems imports dpnewton.data (~30 ms at start-up), which only the data commands need
    from .problems import load_problem_from_prepared

    # fail on bad arguments before any data work
    hyper = _parse_hyper(args.hyper)
    _check_hyper_types(args.algorithm, hyper)
    args.iterations = _iterations(args.algorithm, args.iterations)
    check_run(args.algorithm, args.epsilon, args.delta, args.iterations, args.conversion, args.neighbouring, hyper)
    check_guarantee(args.algorithm, args.conversion, hyper)
    if args.seed is not None and args.seed < 0:
        raise ValueError(f"--seed {args.seed} must be an integer >= 0 (omit --seed for fresh randomness)")
    _check_run_memory(args.algorithm, args.iterations)
    if args.save_model and not args.save_model.endswith(SUFFIXES):
        raise ValueError(f"--save-model {args.save_model}: the file must end in {' or '.join(SUFFIXES)}")
    if args.save_model:
        _check_writable(args.save_model, "--save-model")
    layout = {k: v for k, v in (("format", args.format), ("label_column", args.label_column)) if v is not None}
    if layout and args.dataset is not None:
        raise ValueError(f"--format and --label-column apply to --data files only; --dataset {args.dataset} "
                         "has a fixed layout: drop them")
    if args.format == "libsvm" and args.label_column is not None:
        raise ValueError("--label-column applies to CSV files only (a LIBSVM label is the first field of each "
                         "line): drop it or pass --format csv")
    evaluate = args.dataset is not None if args.evaluate is None else args.evaluate
    with _prepared_copy(args, layout) as prepared:
        _check_run_memory(args.algorithm, args.iterations, prepared.n, prepared.d)
        problem = load_problem_from_prepared(prepared.path, optimum=evaluate, precision=args.precision)
    name = args.dataset or "custom"
    (res,) = run_algorithm(problem, name, args.algorithm, args.epsilon, [args.seed], [args.iterations],
                           delta=args.delta, conversion=args.conversion, hyper=hyper,
                           neighbouring=args.neighbouring)
    full = result_record(res, args.conversion, args.epsilon, resolve_delta(args.delta, args.neighbouring, problem.n))
    record = {"dataset": name, **released_record(full, res.ledger), "d": problem.d}
    if args.ledger or args.save_model:
        record["ledger"] = res.ledger.as_records()
    if args.save_model:
        LinearModel.from_prepared(res.w, prepared.meta, record).save(args.save_model)
        record["model_file"] = args.save_model
    if not args.ledger:
        record.pop("ledger", None)
    if evaluate:   # from the exact data: never in the model file
        record["evaluation"] = {"not_private": "computed from the exact data", "n": problem.n,
                                **{key: full[key] for key in EVALUATION_FIELDS}}
    print(to_json(record, indent=2 if not args.json else None))
    if args.data is not None and args.cache_dir is not None:
        print(f"dpnewton run: kept the prepared copy of {args.data} in {args.cache_dir} (--cache-dir)",
              file=sys.stderr)
    return 0


def _iterations(algorithm: str, iterations: int | None) -> int:
    """-T: required by an iterative method; a one-shot method (objpert) takes none (1 when omitted)."""
    if iterations is not None:
        return iterations
    if get_algorithm(algorithm).iterative:
        raise ValueError(f"--algorithm {algorithm} is iterative: give the number of updates with -T "
                         "(chosen without the private data)")
    return 1


@contextmanager
def _prepared_copy(args, layout: dict):
    """The prepared dataset of the run. A named (public) dataset is cached in --cache-dir (default
    resources/data). A file of the user's own is prepared in a temporary folder removed after the run,
    unless --cache-dir names a folder to keep the prepared copy (and, with --evaluate, its non-private
    optimum) in; :func:`_cmd_run` then says so on stderr."""
    from .problems import prepare_source

    if args.dataset is not None:
        yield prepare_source(dataset=args.dataset, data_dir=args.data_dir,
                             cache_dir=args.cache_dir or DATASET_CACHE_DIR)
        return
    if args.cache_dir is not None:
        yield prepare_source(data_file=args.data, data_dir=args.data_dir, cache_dir=args.cache_dir, **layout)
        return
    with tempfile.TemporaryDirectory(prefix="dpnewton-run-") as tmp:
        yield prepare_source(data_file=args.data, data_dir=args.data_dir, cache_dir=tmp, **layout)


def _cmd_predict(args) -> int:
    # imported on use: dpnewton.data costs ~30 ms at start-up and only the data commands need it
    from .data.loaders import read_table
    from .data.validate import label_text

    model = LinearModel.load(args.model)
    label_column = args.label_column if args.label_column is not None else model.training.get("label_column")
    fmt = args.format or model.training.get("format")
    path = Path(args.data)
    if path.is_dir():
        raise ValueError(f"--data {path} is a directory, not a data file; pass the path of a file inside it")
    if not path.is_file():
        raise FileNotFoundError(f"data file {path} not found")
    _, X, raw, _ = read_table(path, fmt if fmt in ("csv", "libsvm") else None,
                              label_column if fmt == "csv" else None, model.n_features)
    labels = model.predict(X)
    known = {str(c) for c in model.classes}
    given = [label_text(v) for v in raw]  # as the training sidecar names labels
    accuracy = (float(np.mean([g == p for g, p in zip(given, labels)])) if set(given) <= known else None)
    if args.json:
        print(to_json({"model": args.model, "data": args.data, "n": len(labels), "predictions": labels.tolist(),
                       "decision": model.decision_function(X), "accuracy": accuracy}))
    else:
        print("\n".join(str(p) for p in labels))
        if accuracy is not None:
            print(f"accuracy {accuracy:.6g} on {len(labels)} rows", file=sys.stderr)
    return 0


def _cmd_optimum(args) -> int:
    # imported on use: dpnewton.data (also imported by dpnewton.problems) costs ~30 ms at start-up
    from .data import prepare
    from .problems import compute_optimum

    prepared = prepare(args.name, data_dir=args.data_dir, cache_dir=args.cache_dir)
    summary = compute_optimum(prepared.path, args.out, None, tol=args.tol)
    summary.pop("log")
    print(to_json(summary, indent=2))
    return 0


def _cmd_floor(args) -> int:
    # imported on use: dpnewton.problems imports dpnewton.data (~30 ms at start-up), which only the data commands need
    from .problems import load_problem_from_prepared, prepare_source

    if not args.epsilon > 0:
        raise ValueError(f"--epsilon {args.epsilon!r} must be > 0")
    if args.delta is not None:
        check_epsilon_delta(args.epsilon, args.delta)
        epsilon_to_rho(args.epsilon, args.delta, args.conversion)
    prepared = prepare_source(dataset=args.dataset, data_file=args.data, data_dir=args.data_dir,
                              cache_dir=args.cache_dir)
    problem = load_problem_from_prepared(prepared.path)
    delta = resolve_delta(args.delta, BENCHMARK_RELATION, problem.n)
    rec = dataset_floor(problem, args.epsilon, delta, args.conversion)
    record = {"dataset": args.dataset or "custom", "epsilon": rec["epsilon"], "delta": rec["delta"],
              "conversion": rec["conversion"], "rho": rec["rho"], "ridge_floor": rec["ridge_floor"],
              "ridge_lambda": rec["ridge_lambda"], "trivial_excess_loss": rec["trivial_excess_loss"],
              "quadratic_trivial_excess_loss": rec["quadratic_trivial_excess_loss"],
              "loss_opt": rec["loss_opt"], "n": rec["n"], "d": rec["d"], "label": rec["label"]}
    if args.json:
        print(to_json(record))
    else:
        print(f"{SHORT_LABEL} (not a lower bound) of {record['dataset']} (n={record['n']}, d={record['d']}) at "
              f"epsilon={record['epsilon']:g}, delta={record['delta']:.3g} ({record['conversion']}: "
              f"rho={record['rho']:.6g})")
        print(f"  F*                          {record['ridge_floor']:.6g}  "
              f"(ridge lambda* = {record['ridge_lambda']:.6g})")
        print(f"  trivial w=0 (ln 2 - loss*)  {record['trivial_excess_loss']:.6g}  "
              f"(on the quadratic model {record['quadratic_trivial_excess_loss']:.6g})")
        print(f"  loss*                       {record['loss_opt']:.10g}")
    return 0


def _cmd_conversions(args) -> int:
    rows = {c: epsilon_to_rho(args.epsilon, args.delta, c) for c in CONVERSIONS}
    print(to_json({"epsilon": args.epsilon, "delta": args.delta, "rho": rows}, indent=2))
    return 0


RUN_DATA_LAYOUT = """\
data file layout (--data; format from the file name or --format):
  CSV     one example per row, comma-separated (.tsv: tab-separated), UTF-8, optionally
          gzipped. The label is the last column unless --label-column names another
          (header name or 0-based index); every other column is a numeric feature. The
          first row is a header when any of its fields is not a number. Blank lines are
          skipped; every row has the same number of fields; no missing or infinite values.
  LIBSVM  'label index:value ...' per line, indices 1-based and increasing.
  labels  exactly two distinct values of any kind (0/1, -1/+1, no/yes): the smaller one
          (numerically, else alphabetically) is class -1, the larger +1; a model saved
          with --save-model predicts the original values.
  A bias column of ones is prepended, and rows (bias included) longer than 1 are scaled
  onto the unit ball, which the privacy analysis needs; features are not standardised.
  The prepared copy of --data is made in a temporary folder and removed after the run,
  unless --cache-dir names a folder to keep it in."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dpnewton", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"dpnewton {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run one private optimizer and print a JSON record",
                         description="Run one private optimizer on a named dataset or a file of your own and "
                                     "print its JSON record.",
                         epilog=RUN_DATA_LAYOUT, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = run.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", help="a named dataset (see `dpnewton prepare --help`)")
    src.add_argument("--data", help="a LIBSVM or CSV file of your own (layout below)")
    run.add_argument("--format", choices=("csv", "libsvm"), default=None,
                     help="format of --data (default: from the file name: .csv/.tsv or .svm/.libsvm/.svmlight, "
                          "optionally .gz)")
    run.add_argument("--label-column", default=None, metavar="COLUMN",
                     help="CSV label column: a header name or a 0-based index, negative from the end "
                          "(default: the last column)")
    run.add_argument("--algorithm", required=True)
    run.add_argument("--epsilon", type=float, required=True)
    run.add_argument("--delta", type=float, default=None,
                     help=f"default {LIBRARY_DELTA:g} under add-remove, n^-2 under add-remove-public-n")
    run.add_argument("--neighbouring", default=LIBRARY_RELATION, choices=RELATIONS,
                     help=f"neighbouring relation of the guarantee (default {LIBRARY_RELATION}: adding or removing "
                          f"a row, n private; {BENCHMARK_RELATION}: n public, the paper's convention)")
    run.add_argument("--iterations", "-T", type=int, default=None,
                     help="number of updates T of an iterative method (not used by objpert)")
    run.add_argument("--seed", type=int, default=None,
                     help="fixed seed, for benchmarking only (the noise becomes predictable); "
                          "default: fresh OS entropy")
    run.add_argument("--conversion", default=DEFAULT_CONVERSION, choices=CONVERSIONS)
    run.add_argument("--precision", default="float64", choices=tuple(PRECISIONS),
                     help="float32: Z and the optimizer's products in float32; losses, optimum and noise stay "
                          "float64 (default float64)")
    run.add_argument("--hyper", action="append", default=[], metavar="KEY=VALUE",
                     help="algorithm hyper-parameter, repeatable (e.g. grad_frac=0.7)")
    run.add_argument("--data-dir", default=None, help="folder with local copies of the source files")
    run.add_argument("--cache-dir", default=None,
                     help=f"folder for the prepared data (default: {DATASET_CACHE_DIR} for --dataset; for --data a "
                          "temporary folder, removed after the run)")
    run.add_argument("--evaluate", action=argparse.BooleanOptionalAction, default=None,
                     help="add the excess loss and training accuracy under 'evaluation' (computed from the exact "
                          "data: not private; never saved with the model). Default: on for --dataset, off for --data")
    run.add_argument("--json", action="store_true", help="one-line JSON")
    run.add_argument("--ledger", action="store_true", help="include the per-release privacy ledger")
    run.add_argument("--save-model", metavar="FILE", default=None,
                     help="write the weights, intercept, classes and privacy record (.json or .npz)")
    run.set_defaults(func=_cmd_run)

    pred = sub.add_parser("predict", help="predict labels of a LIBSVM or CSV file with a saved model")
    pred.add_argument("--model", required=True, help="a file written by 'dpnewton run --save-model'")
    pred.add_argument("--data", required=True,
                      help="rows in the training file's layout (a label column is read but not used)")
    pred.add_argument("--format", choices=("csv", "libsvm"), default=None,
                      help="default: the training file's format, else from the file name")
    pred.add_argument("--label-column", default=None, help="CSV label column (default: the training one)")
    pred.add_argument("--json", action="store_true",
                      help="one JSON object: predictions, decision values and accuracy (null without labels)")
    pred.set_defaults(func=_cmd_predict)

    opt = sub.add_parser("optimum", help="compute and cache the non-private optimum of a dataset")
    opt.add_argument("name")
    opt.add_argument("--data-dir", default=None)
    opt.add_argument("--cache-dir", default="resources/data")
    opt.add_argument("--out", default=None)
    opt.add_argument("--tol", type=float, default=1e-10)
    opt.set_defaults(func=_cmd_optimum)

    flo = sub.add_parser("floor", help="Gaussian ridge floor (local quadratic model, not a lower bound) "
                                       "of a dataset at one epsilon")
    fsrc = flo.add_mutually_exclusive_group(required=True)
    fsrc.add_argument("--dataset", help="a named dataset (see `dpnewton prepare --help`)")
    fsrc.add_argument("--data", help="a LIBSVM or CSV file of your own")
    flo.add_argument("--epsilon", type=float, required=True)
    flo.add_argument("--delta", type=float, default=None, help="default n^-2")
    flo.add_argument("--conversion", default=DEFAULT_CONVERSION, choices=CONVERSIONS)
    flo.add_argument("--data-dir", default=None, help="folder with local copies of the source files")
    flo.add_argument("--cache-dir", default="resources/data")
    flo.add_argument("--json", action="store_true", help="one-line strict JSON")
    flo.set_defaults(func=_cmd_floor)

    conv = sub.add_parser("conversions", help="rho granted for (epsilon, delta) by every conversion")
    conv.add_argument("--epsilon", type=float, required=True)
    conv.add_argument("--delta", type=float, required=True)
    conv.set_defaults(func=_cmd_conversions)

    for module in ("dpnewton.data.cli", "dpnewton.audit.cli"):
        try:
            mod = __import__(module, fromlist=["register"])
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        mod.register(sub)
    return parser


def _show_progress() -> None:
    """Progress lines of long runs (:mod:`dpnewton.algorithms.progress`) on stderr, once per process."""
    import logging

    class ToStderr(logging.Handler):   # the current sys.stderr at each line
        def emit(self, record):
            print(f"dpnewton: {record.getMessage()}", file=sys.stderr)

    logger = logging.getLogger("dpnewton.progress")
    if not any(isinstance(h, ToStderr) or type(h).__name__ == "ToStderr" for h in logger.handlers):
        logger.addHandler(ToStderr())
        logger.setLevel(logging.INFO)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _show_progress()
    try:
        return int(args.func(args) or 0)
    except ValueError as exc:
        message = str(exc)
    except OSError as exc:  # unreadable or unwritable files, a directory for a file, a full disk
        message = _os_error_message(exc) if exc.filename or not isinstance(exc, FileNotFoundError) else str(exc)
    except MemoryError:
        message = "out of memory; use a smaller data file or a smaller -T, or a machine with more memory"
    except ModuleNotFoundError as exc:  # a benchmark dataset's reader needs the benchmark extra
        if (module := missing_module(exc)) is None:
            raise
        message = missing_message("this command", [module])
    print(f"dpnewton {args.command}: error: {' '.join(message.splitlines())}", file=sys.stderr)
    return 2

