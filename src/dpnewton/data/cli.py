"""``dpnewton prepare`` sub-command (wired into the main CLI via :func:`register`)."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from .errors import DatasetError
from .prepare import prepare, sidecar_path
from .registry import DATASETS


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``prepare`` sub-command to an argparse subparsers object."""
    p = subparsers.add_parser(
        "prepare",
        help="download/verify/preprocess a dataset into a .npz + JSON sidecar",
        description="Prepare a dataset: X after preprocessing (bias included, no row projection), y in {-1,+1}.",
    )
    p.add_argument("name", choices=sorted(DATASETS), metavar="NAME",
                   help="dataset: " + ", ".join(sorted(DATASETS)))
    p.add_argument("--data-dir", help="folder with local source files (e.g. ../shared/datasets)")
    p.add_argument("--out", help="output .npz (default: <cache-dir>/NAME.npz); sidecar is the same stem + .json")
    p.add_argument("--cache-dir", default="resources/data", help="cache folder (default: resources/data)")
    p.add_argument("--prep", choices=["v1", "v2"], help="LIBSVM preprocessing version (a1a etc.; default v2)")
    p.add_argument("--seed", type=int, help="seed for synthetic data (default 0)")
    p.add_argument("--n", type=int, help="synthetic: number of rows (default 10000)")
    p.add_argument("--d", type=int, help="synthetic: dimension (default 100)")
    p.add_argument("--file", help="custom: path of your LIBSVM or CSV file")
    p.add_argument("--format", choices=["libsvm", "csv"], help="custom: file format (default: from extension)")
    p.add_argument("--label-column", help="custom CSV: label column name or 0-based index (default: last)")
    p.add_argument("--no-bias", action="store_true", help="custom: do not prepend the constant-1 column")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="any option of the dataset's DatasetSpec.options (repeatable; numbers and true/false are "
                        "parsed), e.g. a registered dataset's own options")
    p.add_argument("--no-download", action="store_true", help="never download; fail if files are not local")
    p.add_argument("--force", action="store_true", help="rebuild even if a valid cached file exists")
    p.set_defaults(func=run)
    return p


def _option_value(text: str):
    """A --option value: an int, a float, true/false, else the text itself."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _options(args: argparse.Namespace) -> dict:
    opts: dict = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise DatasetError(f"--option {item!r}: expected KEY=VALUE, e.g. --option n=500")
        opts[key.strip()] = _option_value(value)
    for k in ("prep", "seed", "n", "d", "file", "format", "label_column"):
        v = getattr(args, k, None)
        if v is not None:
            opts[k] = v
    if args.no_bias:
        opts["bias"] = False
    if args.no_download:
        opts["allow_download"] = False
    if args.force:
        opts["force"] = True
    return opts


def run(args: argparse.Namespace) -> int:
    try:
        pd = prepare(args.name, data_dir=args.data_dir, out=args.out, cache_dir=args.cache_dir, **_options(args))
    except DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    print(sidecar_path(pd.path))
    print(pd.summary())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dpnewton")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
