# Entry point from the repository root (`snakemake --cores 2`): the workflow is workflow/Snakefile,
# whose paths are relative to itself, so this file only includes it.


include: "workflow/Snakefile"


# An include does not pass its default target on to the including file: name it here.
workflow.default_target = "all"
