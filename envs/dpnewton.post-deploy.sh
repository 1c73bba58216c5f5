#!/usr/bin/env bash
# Run by Snakemake (--sdm conda) inside the freshly created env of envs/dpnewton.yaml: installs the
# dpnewton package of the checkout the workflow is loaded from, editable, so the env runs that
# checkout's code (the git revision the rows record). DPNEWTON_SOURCE is exported by
# workflow/rules/common.smk while the workflow is parsed. The env file pins every dependency, so
# none is resolved here; pip fetches only the build backend (setuptools), as the env creation
# fetched the env's packages.
set -euo pipefail
src="${DPNEWTON_SOURCE:-}"
if [ -z "$src" ] || [ ! -f "$src/pyproject.toml" ]; then
  echo "dpnewton post-deploy: DPNEWTON_SOURCE='$src' is not a dpnewton checkout (the workflow sets it while it is parsed)" >&2
  exit 1
fi
python -m pip install --quiet --no-deps -e "$src"
python -m pip show dpnewton | grep -E "^(Name|Version|Editable project location):"
