"""Running test code while another thread is alive (the parser behaves differently then)."""

from __future__ import annotations

import threading
from typing import Callable, TypeVar

T = TypeVar("T")


def beside_another_thread(action: Callable[[], T]) -> T:
    """`action()`'s result, run while a second thread waits for it to finish."""
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        return action()
    finally:
        release.set()
        other.join()
