"""One `accumlint check`: configuration, analysis, fixing, caching, workers.

`config` reads `[tool.accumlint]`; `analysis` turns one file's text into
diagnostics (parse, model, project view, rules, fix guard); `fixes` applies them
until stable; `noqa` reads suppression comments; `cache` keeps results of
unchanged files; `workers` runs each file's analysis in a process that cannot
take the run down; `engine` runs all of it over many files; `adoption` serves
`--add-noqa`, `--show-settings` and `--show-files`.

Stage 6: imports every stage below it (`rules`, `fix`, `project`, `model`,
`source`, `compat`, `diagnostics`), never `report`, `verify`, `server` or the
command line.
"""
