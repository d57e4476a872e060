"""The progress bar of long runs, on standard error, drawn by click.

Shown only when standard error is a terminal, and only once a run has taken
more than a second: a pre-commit hook on three files never flashes a bar, a
27-second check of a whole tree says how far it is. click's bar (already a
dependency) draws and erases itself; piped or redirected, nothing is printed.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Optional, TextIO

import click

DELAY_SECONDS = 1.0
DELAY_VARIABLE = "ACCUMLINT_PROGRESS_DELAY"  # seconds before the bar shows (tests use 0)
SHOW_CURSOR = "\033[?25h"  # click hides the cursor while its bar is drawn (but on Windows)


class ProgressBar:
    """A callable `progress(done, total)` for the engine; `close()` when the run ends."""

    def __init__(self, stream: Optional[TextIO] = None, color: Optional[bool] = None) -> None:
        self.stream = stream or sys.stderr
        self.delay = _delay()
        self.color = color
        self.enabled = _is_terminal(self.stream)
        self.started = time.monotonic()
        self.shown = 0
        self._bar = None

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        if self._bar is None:
            if time.monotonic() - self.started < self.delay or done >= total:
                return
            self._bar = click.progressbar(
                length=total, label="Checking", file=self.stream, show_pos=True, width=30, color=self.color
            )
            self._bar.__enter__()
        self._bar.update(done - self.shown)
        self.shown = done

    def close(self) -> None:
        """Erase the bar's line, so that what is printed next starts on a clean line.

        click's own ending (`__exit__`) leaves the last bar on screen and moves
        to the next line; on a terminal the findings would follow the bar."""
        if self._bar is not None:
            width = self._bar.max_width or self._bar.width
            self.stream.write("\r" + " " * width + "\r" + ("" if sys.platform == "win32" else SHOW_CURSOR))
            self.stream.flush()
            self._bar = None


def _delay() -> float:
    try:
        return float(os.environ.get(DELAY_VARIABLE, DELAY_SECONDS))
    except ValueError:
        return DELAY_SECONDS


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
