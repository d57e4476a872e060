"""The model of a module's training loops: what the rules ask.

Facts about the module (`facts`, `names`, `tree`, `scope`, `scopes`), the objects
and their roles (`roles`, `frameworks`), the loops and their statements
(`loop`, `gates`), the loss and its scaling (`loss`), the accumulation window
(`window`, `cadence`, `budgets`, `micro`, `forwards`, `schedules`, `trainers`),
what an iteration accumulates (`accumulators`), and the whole (`build`).
Other modules of the project are read through the `ProjectView` the check
passes in, which the model names only as a type.

Stage 2: imports `accumlint.source`, `accumlint.compat` and
`accumlint.diagnostics`.
"""
