#!/usr/bin/env bash
# Create the venv for the diffprivlib side of the comparison (benchmarks/diffprivlib/compare.py).
#
# diffprivlib 0.6.6 does not import with scikit-learn 1.9, which dpnewton's venv uses
# ("ImportError: cannot import name 'DOUBLE' from 'sklearn.tree._tree'", from
# diffprivlib/models/forest.py, imported by diffprivlib.models), so diffprivlib lives in a venv of
# its own. Its metadata asks for numpy>=2.0, scipy>=1.13, scikit-learn>=1.4, joblib>=0.16,
# setuptools>=49. Pinned: scikit-learn 1.7.2 (the last 1.7 release) and numpy/scipy releases that
# have wheels for it and Python 3.11; the import and a constructor call are checked at the end.
#
# Usage: bash benchmarks/diffprivlib/setup_venv.sh            # venv at benchmarks/diffprivlib/.venv
#        DPL_VENV=/some/path bash benchmarks/diffprivlib/setup_venv.sh
#        DPL_PYTHON=python3.11 ...                            # interpreter to build it from
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${DPL_VENV:-$here/.venv}"
py="${DPL_PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet \
    "diffprivlib==0.6.6" \
    "scikit-learn==1.7.2" \
    "numpy==2.3.5" \
    "scipy==1.16.3" \
    "joblib==1.5.2" \
    "threadpoolctl==3.6.0" \
    "setuptools==80.9.0"
"$venv/bin/python" - <<'PY'
import diffprivlib, numpy, scipy, sklearn
from diffprivlib.models import LogisticRegression
LogisticRegression(epsilon=1.0, data_norm=1.0)
print(f"diffprivlib {diffprivlib.__version__}, scikit-learn {sklearn.__version__}, "
      f"numpy {numpy.__version__}, scipy {scipy.__version__}: OK")
PY
echo "venv ready: $venv"
