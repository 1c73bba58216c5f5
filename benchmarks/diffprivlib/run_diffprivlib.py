"""diffprivlib side of the comparison: run in diffprivlib's own venv (see setup_venv.sh).

    <dpl-venv>/bin/python benchmarks/diffprivlib/run_diffprivlib.py split_a1a.npz split_adult.npz ... \
        --out rows.json --reps 10 --epsilons 0.1 1 10

Reads the train/test splits written by compare.py, fits
``diffprivlib.models.LogisticRegression(epsilon=e, data_norm=<the split's data_norm_diffprivlib>,
random_state=rep)`` (every other parameter at diffprivlib's default) for every split, epsilon and
repetition, and writes the result rows (shared.ROW_FIELDS) and the versions as JSON, atomically.
compare.py starts it as a subprocess; it is usable by hand too.
"""

from __future__ import annotations

import os
import sys

# One BLAS thread, set before numpy is first imported (shared.BLAS_ENV lists the same variables).
for _k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
           "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_k] = "1"

import argparse  # noqa: E402
import platform  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import scipy  # noqa: E402
import sklearn  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import diffprivlib  # noqa: E402
from diffprivlib.models import LogisticRegression  # noqa: E402
from shared import atomic_write_json, coef_norm, load_split, test_metrics, timed_fit  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("splits", nargs="+", type=Path, help="split .npz files written by compare.py")
    ap.add_argument("--epsilons", nargs="+", type=float, required=True)
    ap.add_argument("--reps", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)

    rows = []
    with threadpool_limits(limits=1):
        for path in args.splits:
            s = load_split(path)
            labels = np.unique(s["y_train"])
            for eps in args.epsilons:
                for rep in range(args.reps):
                    row = {"dataset": s["dataset"], "epsilon": eps, "method": "diffprivlib",
                           "library": f"diffprivlib {diffprivlib.__version__}", "rep": rep,
                           "random_state": rep, "data_norm": s["data_norm_diffprivlib"],
                           "n_train": len(s["y_train"]), "n_test": len(s["y_test"]),
                           "d": s["X_train"].shape[1], "delta": 0.0}
                    model = LogisticRegression(epsilon=eps, data_norm=s["data_norm_diffprivlib"],
                                               random_state=rep)
                    try:
                        with timed_fit(ignore=("PrivacyLeakWarning", "DeprecationWarning")) as t:
                            model.fit(s["X_train"], s["y_train"])
                    except Exception as exc:  # recorded, the run goes on
                        row.update(t, status="error", message=f"{type(exc).__name__}: {exc}"[:300])
                        rows.append(row)
                        continue
                    p_pos = model.predict_proba(s["X_test"])[:, list(model.classes_).index(labels[1])]
                    row.update(t, status="ok", message="",
                               n_iter=int(np.max(model.n_iter_)),
                               coef_norm=coef_norm(model.coef_, model.intercept_),
                               **test_metrics(s["y_test"], labels, p_pos, model.predict(s["X_test"])))
                    rows.append(row)
            print(f"diffprivlib: {s['dataset']} done ({len(rows)} rows)", flush=True)

    defaults = LogisticRegression().get_params()
    defaults.pop("accountant", None)
    atomic_write_json(args.out, {
        "rows": rows,
        "env": {"python": platform.python_version(), "executable": sys.executable,
                "diffprivlib": diffprivlib.__version__, "scikit-learn": sklearn.__version__,
                "numpy": np.__version__, "scipy": scipy.__version__,
                "LogisticRegression_defaults": defaults},
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
