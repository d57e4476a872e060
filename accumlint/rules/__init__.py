"""The rules: one module per family, each rule one module-level `Rule(...)` there.

A rule's definition names its code, name, fix kind and summary and the
function that finds it (on the model, never walking the tree for roles);
its document is `rules/<code>.md` at the repository's root. `catalog` reads
the definitions without importing the modules (no libcst), `registry`
imports them and runs them, `base` is the shared vocabulary (`Finding`,
movability), `docs` reads the documents. CONTRIBUTING.md says how to add one.

Stage 5: imports `accumlint.fix`, `accumlint.project`, `accumlint.model`,
`accumlint.source`, `accumlint.compat` and `accumlint.diagnostics`.
"""
