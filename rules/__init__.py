"""Rule documents (GA101.md ...), shipped as the package `accumlint.ruledocs`; see accumlint/rules/docs.py."""
