"""The ``benchmark`` extra: what the benchmark imports beyond the library, and the message naming it.

``pip install dpnewton`` installs the library (:class:`dpnewton.DPLogisticRegression`, :func:`dpnewton.fit`,
:mod:`dpnewton.preprocessing`, :mod:`dpnewton.privacy`, the algorithms and the commands ``run``,
``predict``, ``conversions``, ...) with numpy, scipy, scikit-learn, dp-accounting and threadpoolctl only.
The pipeline (:mod:`dpnewton.pipeline`: tables, figures, reports) and the readers of the covertype and
protein files also import the packages of :data:`MODULES`, which ``pip install "dpnewton[benchmark]"``
adds (pyproject.toml's ``benchmark`` extra).
"""

from __future__ import annotations

import importlib.util
import sys

#: the command that installs the extra
INSTALL = 'pip install "dpnewton[benchmark]"'
#: import name -> distribution name (as the extra lists it) of every package the benchmark imports
#: beyond the library
MODULES = {"pandas": "pandas", "pyarrow": "pyarrow", "matplotlib": "matplotlib", "yaml": "pyyaml",
           "jsonschema": "jsonschema"}


def missing_message(needed_by: str, modules) -> str:
    """One line: ``needed_by`` needs these (import names of :data:`MODULES`), and the command installing them."""
    names = ", ".join(MODULES.get(m, m) for m in modules)
    return f"{needed_by} needs {names} (not installed); install the benchmark extra: {INSTALL}"


def missing_module(exc: ImportError) -> str | None:
    """The module of :data:`MODULES` whose absence raised ``exc``; None when it is any other import error."""
    top = (exc.name or "").split(".")[0]
    return top if isinstance(exc, ModuleNotFoundError) and top in MODULES else None


def _installed(module: str) -> bool:
    if module in sys.modules:
        return True
    try:
        return importlib.util.find_spec(module) is not None  # finds, does not import
    except ImportError:
        return False


def require(needed_by: str) -> None:
    """ModuleNotFoundError with :func:`missing_message` when a package of the extra is not installed."""
    missing = [m for m in MODULES if not _installed(m)]
    if missing:
        raise ModuleNotFoundError(missing_message(needed_by, missing), name=missing[0])
