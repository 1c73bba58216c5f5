"""Command line: ``dpnewton run | predict | prepare | optimum | floor | conversions | audit``.

Errors in the arguments or the data end the command with exit status 2 and a one-line message
(no traceback).
"""

# Subcommands import their heavy modules on use (inside each _cmd_*), to keep `dpnewton --help` fast.
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from . import __version__
from .algorithms import get_algorithm
from .experiment import DEFAULT_CONVERSION, result_record, run_algorithm, validate_run_arguments
from .floor import SHORT_LABEL, dataset_floor
from .io import to_json
from .model import SUFFIXES, LinearModel
from .privacy import CONVERSIONS, check_epsilon_delta, default_delta, epsilon_to_rho


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


def _cmd_run(args) -> int:
    # imported on use: dpnewton.problems imports dpnewton.data (~30 ms at start-up), which only the data commands need
    from .problems import load_problem_from_prepared, prepare_source

    # fail on bad arguments before any data work
    get_algorithm(args.algorithm)
    validate_run_arguments(args.epsilon, args.delta, args.iterations, args.conversion)
    if args.save_model and not args.save_model.endswith(SUFFIXES):
        raise ValueError(f"--save-model {args.save_model}: the file must end in {' or '.join(SUFFIXES)}")
    prepared = prepare_source(dataset=args.dataset, data_file=args.data, data_dir=args.data_dir,
                              cache_dir=args.cache_dir)
    problem = load_problem_from_prepared(prepared.path)
    name = args.dataset or "custom"
    (res,) = run_algorithm(problem, name, args.algorithm, args.epsilon, [args.seed], [args.iterations],
                           delta=args.delta, conversion=args.conversion, hyper=_parse_hyper(args.hyper))
    delta = default_delta(problem.n) if args.delta is None else args.delta
    record = result_record(res, args.conversion, args.epsilon, delta)
    record["n"], record["d"] = problem.n, problem.d
    if args.ledger or args.save_model:
        record["ledger"] = res.ledger.as_records()
    if args.save_model:
        LinearModel.from_prepared(res.w, prepared.meta, record).save(args.save_model)
        record["model_file"] = args.save_model
    if not args.ledger:
        record.pop("ledger", None)
    print(to_json(record, indent=2 if not args.json else None))
    return 0


def _cmd_predict(args) -> int:
    # imported on use: dpnewton.data costs ~30 ms at start-up and only the data commands need it
    from .data.loaders import read_table
    from .data.validate import label_text

    model = LinearModel.load(args.model)
    label_column = args.label_column if args.label_column is not None else model.training.get("label_column")
    fmt = args.format or model.training.get("format")
    path = Path(args.data)
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
    prepared = prepare_source(dataset=args.dataset, data_file=args.data, data_dir=args.data_dir,
                              cache_dir=args.cache_dir)
    problem = load_problem_from_prepared(prepared.path)
    delta = default_delta(problem.n) if args.delta is None else args.delta
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dpnewton", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"dpnewton {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run one private optimizer and print a JSON record")
    src = run.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", help="a named dataset (see `dpnewton prepare --help`)")
    src.add_argument("--data", help="a LIBSVM or CSV file of your own")
    run.add_argument("--algorithm", required=True)
    run.add_argument("--epsilon", type=float, required=True)
    run.add_argument("--delta", type=float, default=None, help="default n^-2")
    run.add_argument("--iterations", "-T", type=int, required=True)
    run.add_argument("--seed", type=int, default=None,
                     help="fixed seed, for benchmarking only (the noise becomes predictable); "
                          "default: fresh OS entropy")
    run.add_argument("--conversion", default=DEFAULT_CONVERSION, choices=CONVERSIONS)
    run.add_argument("--hyper", action="append", default=[], metavar="KEY=VALUE",
                     help="algorithm hyper-parameter, repeatable (e.g. grad_frac=0.7)")
    run.add_argument("--data-dir", default=None, help="folder with local copies of the source files")
    run.add_argument("--cache-dir", default="resources/data")
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as exc:
        print(f"dpnewton {args.command}: error: {exc}", file=sys.stderr)
        return 2

