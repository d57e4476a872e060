"""The vocabulary of fixes: tree edits (`edits`), which names are bound where
they are read (`bindings`), and what every fix must keep (`guard`).

Rules build their fixes from these; applying them round after round until the
text is stable is a check's job (`accumlint.check.fixes`).

Stage 4: imports `accumlint.model`, `accumlint.source`, `accumlint.compat` and
`accumlint.diagnostics`.
"""
