"""accumlint: find, explain and fix gradient-accumulation mistakes in PyTorch code.

Importing this package must stay cheap: it is what a pre-commit hook pays on
every commit, so nothing heavy (libcst, torch) is imported here.
"""

__version__ = "0.2.0"
