"""Every reach into LibCST's or CPython's private parts, each guarded, each with a public fallback.

Nothing else in accumlint may touch a dependency's private names. Each reach
below is feature-detected when its module is imported: when the private name
is missing or is not what the speed-up expects (a new LibCST, another Python),
accumlint takes the public path instead, which gives the same findings and
fixes, only slower. `ACCUMLINT_NO_SPEEDUPS=1` takes the public path for all of
them (benchmarks/compare_speedups.py checks that the output is byte-identical).
What each one saves is measured in README, "Speed", not here.

Two kinds of reach:

Read-only, on whatever accumlint parsed (active wherever accumlint runs):

- `codegen`: LibCST's `libcst._nodes.internal.CodegenState` and the nodes'
  `_codegen`, subclassed to generate a node's text without recording positions
  (`model.names.code`) and to find the positions of the few reported nodes in
  one lean pass (`model.positions`). Why: `PositionProvider` builds a position
  for every node of the module. Fallback: `Module.code_for_node`, and `MetadataWrapper` with
  `PositionProvider` / `WhitespaceInclusivePositionProvider`.
- `compile_budget`: `sys._getframe` (how deep the stack is) and CPython's
  compiler recursion scale (COMPILER_STACK_FRAME_SCALE, three levels a frame,
  probed): a `compile` under a lowered recursion limit bounds a file's nesting
  (`source.gate`'s shortcut, cheaper than stage two). Fallback: stage two in
  full (`ast.parse`, `nesting`, `compile` of the tree).

Process-wide (they change LibCST's classes, `dataclasses` or the collector
for the whole process): they run only once accumlint's own `check` command
has called `enable()`, never when accumlint is imported as a library or runs
the editor server:

- `node_init`: LibCST's node classes get an `__init__` that stores fields
  through the slots' descriptors, using `dataclasses._HAS_DEFAULT_FACTORY`.
  Why: a parse builds every node through it. Fallback: LibCST's own `__init__`.
- `validation`: `CSTNode.__post_init__` (LibCST's validating hook) is swapped
  for a no-op while the parser builds a tree. Why: a tree the parser built
  is valid by construction. Fallback: `libcst.parse_module` as is.
- `generated_code`: the `exec` that `dataclasses` calls (a module global it
  looks up) is replaced while LibCST is imported, to reuse the compiled code of
  the methods it writes; it reads its caller through `sys._getframe`. Why:
  compiling them is most of `import libcst`. Fallback: `dataclasses` compiles as usual.
- `collector`: the cyclic garbage collector paused while a tree is built, and
  what the analysis imports frozen (`gc.freeze`). Why: a tree is freed by
  reference counting, yet building one sets off collection after collection.
  Fallback: the collector runs as usual.
- `quick_exit`: the command's process ends with `atexit._run_exitfuncs()` then
  `os._exit`, skipping the interpreter's teardown. Why: a process that ends
  need not free every object one by one. Only from the console entry point, and never under a tracer, a
  profiler or a `sys.monitoring` tool, nor when `__main__` is someone else's
  (`python -m cProfile -m accumlint.cli` writes its profile). Fallback:
  `sys.exit`.

Stage 0: imports nothing of accumlint. Every stage above may import it.
"""

from __future__ import annotations

import os

# The environment variable that turns every speed-up off.
KILL_SWITCH = "ACCUMLINT_NO_SPEEDUPS"

_process_wide = False


def speedups_allowed() -> bool:
    """False when the kill switch is set (to anything but "" or "0")."""
    return os.environ.get(KILL_SWITCH, "") in ("", "0")


def enable() -> None:
    """Let the process-wide speed-ups run in this process (unless the kill switch is set).

    Only accumlint's own `check` command calls it: a library user's process, or
    the editor server's, keeps LibCST's classes and its collector as they are."""
    global _process_wide
    _process_wide = speedups_allowed()


def process_wide() -> bool:
    """Whether the process-wide speed-ups may run (`enable()` was called, no kill switch)."""
    return _process_wide
