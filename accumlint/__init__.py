"""accumlint: find, explain and fix gradient-accumulation mistakes in PyTorch code.

Importing this package must stay cheap: it is what a pre-commit hook pays on
every commit, so nothing heavy (libcst, torch) is imported here.

The code is laid out by stage, and imports only go down the stages (a test,
tests/test_layout.py, fails on one that goes up and on any import cycle):

    0  compat       speed-ups that touch LibCST's or CPython's private parts
       diagnostics  the records that flow out of a check
    1  source       files, notebooks, the text gate, parsing
    2  model        the model of a module's training loops
    3  project      the project a module belongs to
    4  fix          tree edits, bindings, the fix guard
    5  rules        the rules, their catalog and documents
    6  check        configuration, analysis, fixing, cache, workers, engine
    7  report       output formats
       verify       the runtime verifier
    8  server       the editor server
    9  cli          the command line (`accumlint`, `python -m accumlint`)
"""

__version__ = "0.2.0"
