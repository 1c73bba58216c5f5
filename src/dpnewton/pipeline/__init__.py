"""The Snakemake pipeline's Python side: config expansion, job runner, aggregation, tables, plots.

The workflow rules (``Snakefile``, ``workflow/rules/*.smk``) stay thin: they only map files to
calls of this package. Everything here is importable and unit-tested without Snakemake.
"""
