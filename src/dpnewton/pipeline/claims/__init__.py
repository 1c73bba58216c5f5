"""The paper's claims, checked against our own runs: verdicts, numbers and reasons.

Input: the aggregate tables (runs, summary, best_T, baseline, best_curves, update_costs). Runtimes
are lone-run runtimes from the timing stage's costs (:mod:`dpnewton.pipeline.timing`). Output: a Markdown
report (``claims.md``), its CSV (one row per claim x setting), a robustness table (best T and
configuration chosen on one half of the seeds, reported on the other half) and a divergence table
(fraction of runs that diverged or did worse than the trivial output w = 0, and reset fractions).

Settings (each claim is evaluated under each of them):

* ``a``: the paper's protocol with a correct conversion (``protocol_conversion``, bs16), the
  released default hyper-parameters (DP-GD step 1/L = 4);
* ``a-tuned``: as ``a`` but every algorithm is represented by its best configuration (the declared
  tuning variants of the config: double-noise gradient share / trace coefficient, DP-GD step);
* ``b``: the official code's rho (``official_conversion``, official-fsolve). Where its rho equals
  the protocol's (epsilon >= ~0.13, checked numerically), the ``a`` rows are reused;
* ``c``: tight accounting (``tight_conversion``, gdp).

Selection of T and of the configuration is non-private (argmin of the mean excess loss over seeds,
:mod:`dpnewton.pipeline.selection`), as in the paper.

Modules, in the order the data flows:

* :mod:`.paper`: the paper's claims, numbers and thresholds (one table, :data:`PAPER_CLAIMS`);
* :mod:`.cells`: the best-T cells of each setting;
* :mod:`.verdict` and :mod:`.rules`: the :class:`Verdict` and one rule per claim;
* :mod:`.sensitivity`: which verdicts rest on a grid cap or on timing noise;
* :mod:`.tables`: robustness, divergence, configurations and code-version tables;
* :mod:`.evaluation`: every claim under every setting (:func:`evaluate`);
* :mod:`.report`: the Markdown and the CSVs (:func:`write_claims`).
"""

from .cells import GROUP, SETTINGS, base_of, is_reset, setting_cells
from .evaluation import evaluate, official_rho
from .paper import (DAMPED_GOOD, FIG1_MARGIN, PAPER_CLAIMS, PAPER_FIG1, PAPER_TABLE1, QU_FACTOR, QU_ITERATIONS_FACTOR,
                    TABLE1_FACTOR, PaperClaim, paper_claim)
from .report import markdown, shown_verdict, summary_table, write_claims
from .rules import (DEGENERATE, degenerate_cell, loss_at_time, verdict_best_loss, verdict_damped, verdict_fig1,
                    verdict_oracle, verdict_oracle_gap, verdict_qu, verdict_qu_speed, verdict_speedup,
                    verdict_table1_cell)
from .sensitivity import (UNBOUNDED_RUNTIME, continued_past_cap, scaled_costs,
                          table1_cell_within_timing, with_cap_check, with_timing_check)
from .tables import (CODE_COLUMNS, accounting_share, code_versions, configurations, divergence_table, heldout_cells,
                     split_seed_selection)
from .verdict import NA, NOT, PARTLY, REPRODUCED, Verdict

__all__ = [
    "CODE_COLUMNS", "DAMPED_GOOD", "DEGENERATE", "FIG1_MARGIN", "GROUP", "NA", "NOT", "PAPER_CLAIMS", "PAPER_FIG1",
    "PAPER_TABLE1", "PARTLY", "QU_FACTOR", "QU_ITERATIONS_FACTOR", "REPRODUCED", "SETTINGS", "TABLE1_FACTOR",
    "UNBOUNDED_RUNTIME", "PaperClaim", "Verdict", "accounting_share", "base_of", "code_versions", "configurations",
    "continued_past_cap", "degenerate_cell", "divergence_table", "evaluate", "heldout_cells", "is_reset",
    "loss_at_time", "markdown", "official_rho", "paper_claim", "scaled_costs", "setting_cells", "shown_verdict",
    "split_seed_selection", "summary_table", "table1_cell_within_timing", "verdict_best_loss", "verdict_damped",
    "verdict_fig1", "verdict_oracle", "verdict_oracle_gap", "verdict_qu", "verdict_qu_speed", "verdict_speedup",
    "verdict_table1_cell", "with_cap_check", "with_timing_check", "write_claims",
]
