"""The Snakemake pipeline's Python side: config expansion, job runner, aggregation, tables, plots.

The workflow rules (``Snakefile``, ``workflow/rules/*.smk``) stay thin: they only map files to
calls of this package. Everything here is importable and unit-tested without Snakemake.

It needs the ``benchmark`` extra (pandas, pyarrow, matplotlib, PyYAML, jsonschema): importing it
without them stops with the install command (:mod:`dpnewton.benchmark_extra`).
"""

from ..benchmark_extra import require

require("dpnewton.pipeline")
