"""Samples of the fixtures that stay put when fixtures are added or removed.

A test too slow to run on every fixture runs on a sample. Taking every n-th item
of a sorted list would let one new fixture shift every later item in or out of
the sample, so that adding a fixture can break a test about another one. Here
each item is in or out by a hash of its own key (its path relative to the
checkout, and whatever else names the case), never by its place in a list: a new
fixture adds at most its own cases, and moves no other case in or out.
"""

from __future__ import annotations

import hashlib


def in_sample(key: str, one_in: int) -> bool:
    """Whether the case named `key` is in a sample of about one case in `one_in`."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % one_in == 0
