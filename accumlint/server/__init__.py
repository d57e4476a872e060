"""`accumlint server`: a language server over stdio, for editors (pygls + lsprotocol).

Diagnostics come from the same engine and configuration as `accumlint
check`, so an editor shows exactly what CI reports. `lint` runs the checks
on an editor's unsaved text (a `.py` file or a notebook's cells); `app`
speaks the protocol: diagnostics, quick fixes, fix-all, noqa and hover.
pygls is imported only here, and only when the server runs.

Stage 8: imports `accumlint.check`, `accumlint.report` and the stages below;
never `verify` or the command line.
"""
