# dpnewton pipeline: prepare data -> non-private optimum -> optimizer runs -> aggregate -> figures/tables.
# Layout and result files: docs/pipeline.md; config keys: config/README.md.
import os

from snakemake.utils import min_version

min_version("8.0")


# The embedded default applies only when no --configfile is given. Snakemake would otherwise merge a
# --configfile key by key into it, so a config's `datasets:` and `algorithms:` would silently gain
# the default's entries (and whether that happens would depend on --directory).
if not workflow.overwrite_configfiles:

    configfile: os.path.join(workflow.basedir, "config", "config.yaml")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/optimum.smk"
include: "workflow/rules/runs.smk"
include: "workflow/rules/timing.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/plots.smk"
include: "workflow/rules/publish.smk"
include: "workflow/rules/claims.smk"


onstart:
    log_plan()


rule all:
    default_target: True
    input:
        final_outputs(),
    localrule: True
