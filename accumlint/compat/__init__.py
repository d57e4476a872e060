"""Speed-ups that reach into LibCST's or CPython's private parts.

`node_init` (LibCST nodes built without re-validation), `generated_code` (the
code `dataclasses` writes, compiled once and kept) and `collector` (the cyclic
garbage collector paused while a tree is built). Nothing else in accumlint may
touch a dependency's private names.

Stage 0: imports nothing of accumlint. Every stage above may import it.
"""
