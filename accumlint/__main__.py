"""`python -m accumlint`: the same command as the `accumlint` console script."""

from accumlint.cli import run

if __name__ == "__main__":
    run()
