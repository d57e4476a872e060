"""The rules: one module per family, each rule a function from the model to findings.

`catalog` holds every rule's code, name and message; `registry` lists the
functions that run; `base` the shared vocabulary (`Finding`, movability);
`docs` reads the rule documents shipped beside them.

Stage 5: imports `accumlint.fix`, `accumlint.project`, `accumlint.model`,
`accumlint.source`, `accumlint.compat` and `accumlint.diagnostics`.
"""
