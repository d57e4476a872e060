"""LibCST's parser, with the speed-ups of accumlint's own command.

In accumlint's `check` command (`accumlint.compat.enable`), the parse runs
without LibCST re-validating the nodes its own parser builds
(`accumlint.compat.validation`): those checks guard trees that people build by
hand, and a tree the parser has just produced from a text CPython already
compiled is valid by construction. It also runs with Python's cyclic garbage
collector paused (`accumlint.compat.collector`), and, once the process has
parsed INSTALL_AFTER_CHARS of text, with node constructors that store fields
through the slots (`accumlint.compat.node_init`): installing them costs more than
a one-file check would win back. Each changes LibCST or the collector for the
whole process, so accumlint imported as a library, or running the editor
server, parses with LibCST's plain `parse_module`: the same trees, only slower.
"""

from __future__ import annotations

import libcst

from accumlint.compat import node_init, process_wide
from accumlint.compat.collector import collector_paused
from accumlint.compat.validation import unvalidated_parse
from accumlint.source.native import native_errors_silenced

# How much text a process parses before the faster node constructors pay for themselves.
INSTALL_AFTER_CHARS = 50_000
_parsed_chars = 0


def parse_module(text: str) -> libcst.Module:
    """`libcst.parse_module(text)`, faster in accumlint's own command."""
    global _parsed_chars
    if not process_wide():
        with native_errors_silenced():
            return libcst.parse_module(text)
    if _parsed_chars < INSTALL_AFTER_CHARS:
        _parsed_chars += len(text)
        if _parsed_chars >= INSTALL_AFTER_CHARS:
            node_init.install()
    with collector_paused(), native_errors_silenced():
        return unvalidated_parse(text)
