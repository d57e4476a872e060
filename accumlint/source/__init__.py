"""A source file, up to its syntax tree.

Finding the files to check and reading and writing them faithfully (`files`),
notebooks as one module (`notebooks`), where comments and string literals are
(`literals`), regular expressions compiled on first use (`patterns`), the text
gate that decides which files LibCST sees and what a backward call looks like
(`gate`), and the parse itself (`parsing`, `native`).

Stage 1: imports `accumlint.compat` and `accumlint.diagnostics` only.
"""
