# The results browser (dpnewton.pipeline.browser): one self-contained HTML page of the run's tables,
# Plotly inlined, no server or network needed.
rule browser:
    input:
        unpack(browser_inputs),
    output:
        "results/browser.html",
    log:
        "logs/browser.log",
    localrule: True
    conda:
        "../../envs/dpnewton.yaml"
    message:
        "Writing the results browser results/browser.html"
    script:
        "../scripts/browser.py"
