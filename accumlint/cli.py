"""The `accumlint` command: argument parsing, output streams and exit codes.

Start-up time is what a pre-commit hook pays on every commit, so this module
imports only click and the catalog; the engine (and through it libcst, only
for files that pass the prefilter) is imported when `check` runs, and the
verifier (torch) only when `verify` or `--verify` is asked for.

Exit codes: 0 no findings, 1 findings remain, 2 a file could not be read or
parsed, a bad configuration, or an internal error (2 wins over 1).
"""

from __future__ import annotations

import errno
import io
import math
import os
import signal
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Optional

import click

import accumlint
from accumlint.compat import enable as enable_speedups
from accumlint.compat.quick_exit import exit_now, may_exit_now
from accumlint.rules.catalog import ALL_RULES, RULES, RULES_BY_CODE, RULES_BY_NAME, SUPPRESSION_RULES

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def install_hint(extra: str) -> str:
    """How to install an extra: from a checkout (accumlint is not published on a package index yet)."""
    return f"from a checkout of accumlint, pip install -e '.[{extra}]'"


def fail(message: str) -> "click.exceptions.Exit":
    """Print an error the way every accumlint error looks, and exit with 2."""
    click.echo(f"accumlint: error: {message}", err=True)
    return click.exceptions.Exit(EXIT_ERROR)


class LazyGroup(click.Group):
    """A group whose `verify` command (torch, user code) is imported only when run.

    `accumlint --help` lists it from a fixed one-line help, so listing
    commands never imports torch.
    """

    lazy = {
        "verify": (
            "accumlint.verify.command",
            "verify_command",
            "Run a training loop with and without accumulation and compare gradients (imports torch and your code).",
        ),
        "server": (
            "accumlint.server.command",
            "server_command",
            "Run the language server over stdio, for editors (needs the `lsp` extra).",
        ),
    }
    # A missing module and the extra that brings it.
    extras = {"torch": "verify", "pygls": "lsp", "lsprotocol": "lsp"}
    # Other names of commands, hidden from the help: `rule` is what ruff users type.
    aliases = {"rule": "explain"}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, name: str) -> Optional[click.Command]:
        name = self.aliases.get(name, name)
        if name not in self.lazy:
            return super().get_command(ctx, name)
        module_name, attribute, _ = self.lazy[name]
        try:
            module = __import__(module_name, fromlist=[attribute])
        except ModuleNotFoundError as error:
            if error.name in self.extras:
                extra = self.extras[error.name]
                raise fail(f"`accumlint {name}` needs {error.name}: {install_hint(extra)}") from None
            raise fail(f"`accumlint {name}` is not available in this installation ({error})") from None
        return getattr(module, attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            if name in self.lazy:
                rows.append((name, self.lazy[name][2]))
            else:
                command = super().get_command(ctx, name)
                if command is not None and not command.hidden:
                    rows.append((name, command.get_short_help_str(formatter.width - 6 - len(name))))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(accumlint.__version__, "-V", "--version", prog_name="accumlint", message="%(prog)s %(version)s")
def cli() -> None:
    """Find, explain and fix gradient-accumulation mistakes in PyTorch training code."""


def _binary(stream):
    """The byte stream under a text stream (click's `get_binary_stream` is deprecated);
    a stream that is already binary, such as one a test hands in, is itself."""
    return getattr(stream, "buffer", stream)


class OutputFormats(click.ParamType):
    """`--output-format`: one format, or several as pylint takes them, `FORMAT[:FILE],...`.

    One entry may name no file (it is printed, or written to `--output-file`);
    each other one is written to its file, from the same run: a CI job gets
    annotations and a SARIF file from one check."""

    name = "format"

    @property
    def formats(self) -> tuple[str, ...]:
        from accumlint.report import FORMATS  # a small module: no formatter is imported with it

        return FORMATS

    def get_metavar(self, param: click.Parameter, ctx: Optional[click.Context] = None) -> str:
        return "[" + "|".join(self.formats) + "][:FILE],..."

    def convert(self, value, param, ctx) -> tuple[tuple[str, Optional[str]], ...]:
        if isinstance(value, tuple):
            return value
        entries = []
        for entry in value.split(","):
            name, _, path = entry.strip().partition(":")
            if name not in self.formats:
                self.fail(f"{name!r} is not one of {', '.join(self.formats)} (FORMAT or FORMAT:FILE)", param, ctx)
            entries.append((name, path or None))
        if sum(path is None for _, path in entries) > 1:
            self.fail("at most one format can be printed; give the others a file (FORMAT:FILE)", param, ctx)
        return tuple(entries)


def _selectors(values: tuple[str, ...]) -> Optional[tuple[str, ...]]:
    """Comma-separated and repeated options, flattened; None when not given."""
    if not values:
        return None
    parts = [part.strip() for value in values for part in value.split(",")]
    return tuple(part for part in parts if part) or ("",)  # only blanks: an empty selector, an error


class Seconds(click.ParamType):
    """A positive, finite number of seconds (`nan` and `inf` are not)."""

    name = "seconds"

    def convert(self, value, param, ctx) -> float:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number) or number <= 0:
            self.fail(f"{value!r} is not a positive, finite number of seconds", param, ctx)
        return number


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--fix", is_flag=True, help="Apply safe fixes (and unsafe ones with --unsafe-fixes).")
@click.option("--unsafe-fixes/--no-unsafe-fixes", default=None, help="Also offer and apply unsafe fixes.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; change no file.")
@click.option("--select", multiple=True, metavar="CODES", help="Only these codes or prefixes (e.g. GA2,GA101).")
@click.option("--ignore", multiple=True, metavar="CODES", help="Disable these codes or prefixes.")
@click.option("--extend-select", multiple=True, metavar="CODES", help="Enable these on top of the selection.")
@click.option("--fixable", multiple=True, metavar="CODES", help="Only these codes or prefixes may be fixed (default: ALL).")
@click.option("--unfixable", multiple=True, metavar="CODES", help="These codes or prefixes are never fixed.")
@click.option("--extend-fixable", multiple=True, metavar="CODES", help="These may be fixed, on top of `fixable`.")
@click.option(
    "--extend-exclude",
    multiple=True,
    metavar="PATTERNS",
    help="Also skip these paths (.gitignore syntax, relative to the current folder; comma-separated, repeatable).",
)
@click.option(
    "--output-format",
    type=OutputFormats(),
    default="concise",
    show_default=True,
    help="How findings are printed (`full`: with source lines, help and fix; `text` is `concise`); "
    "`FORMAT:FILE,...` also writes others, from the same run.",
)
@click.option(
    "--output-file",
    "-o",
    type=click.Path(dir_okay=False),
    help="Write the report (or the diff) to this file instead of standard output.",
)
@click.option("--watch", "-w", is_flag=True, help="Check again whenever a checked file changes (needs the `watch` extra).")
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Colour the terminal output (auto: on a terminal, unless NO_COLOR is set or TERM=dumb; FORCE_COLOR forces it).",
)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even if findings remain (errors still exit 2).")
@click.option("--statistics", is_flag=True, help="Print counts per rule instead of the findings.")
@click.option("--show-source", is_flag=True, help="Same as --output-format full.")
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="Use this pyproject.toml.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the findings.")
@click.option("-v", "--verbose", is_flag=True, help="Also print what was checked, and timings, on stderr.")
@click.option("--jobs", type=click.IntRange(min=1), help="Worker processes (default: all cores for many files).")
@click.option("--no-cache", is_flag=True, help="Do not read or write the cache of results.")
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Keep the cache here (default: the project root's .accumlint_cache).")
@click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODE` to every line with a finding; change nothing else.")
@click.option("--show-settings", is_flag=True, help="Print the settings that apply to the first path, and exit.")
@click.option("--show-files", is_flag=True, help="Print the files that would be checked, and exit.")
@click.option("--show-project", is_flag=True,
              help="Print the project root and, for each checked module, the project modules and configuration files it reads; then exit.")
@click.option(
    "--file-timeout",
    type=Seconds(),
    metavar="SECONDS",
    help="CPU seconds each file's analysis may take (and 10x that in wall time); a file past it is reported, not checked (default: 30).",
)
@click.option("--stdin-filename", help="The file name to report (and configure) for code read from stdin.")
@click.option("--verify", is_flag=True, help="With --fix: run the runtime verifier on each fixed file (imports torch).")
@click.option("--no-prefilter", is_flag=True, hidden=True, help="Parse every file (for benchmarks).")
def check(
    paths: tuple[str, ...],
    fix: bool,
    unsafe_fixes: Optional[bool],
    diff: bool,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    extend_select: tuple[str, ...],
    fixable: tuple[str, ...],
    unfixable: tuple[str, ...],
    extend_fixable: tuple[str, ...],
    extend_exclude: tuple[str, ...],
    output_format: tuple[tuple[str, Optional[str]], ...],
    output_file: Optional[str],
    watch: bool,
    color: str,
    exit_zero: bool,
    statistics: bool,
    show_source: bool,
    config_path: Optional[Path],
    quiet: bool,
    verbose: bool,
    jobs: Optional[int],
    no_cache: bool,
    cache_dir: Optional[str],
    add_noqa: bool,
    show_settings: bool,
    show_files: bool,
    show_project: bool,
    file_timeout: Optional[float],
    stdin_filename: Optional[str],
    verify: bool,
    no_prefilter: bool,
) -> None:
    """Check files, folders (recursively) or `-` (stdin) for accumulation mistakes."""
    started = time.perf_counter()
    enable_speedups()  # the speed-ups that change LibCST and the collector for the whole process
    from accumlint.check.config import ConfigError, Overrides, Resolver, SelectionLayer
    from accumlint.check.engine import Request
    from accumlint.check.engine import check as run_engine
    from accumlint.report.progress import ProgressBar

    if verify and (diff or not fix):
        raise fail("--verify needs --fix (and cannot be used with --diff)")
    from_stdin = "-" in paths or (not paths and stdin_filename is not None)
    if from_stdin and len(paths) > 1:
        raise fail("`-` (stdin) cannot be combined with other paths")
    if add_noqa and (fix or diff or from_stdin):
        raise fail("--add-noqa cannot be combined with --fix, --diff or stdin")
    if watch:
        if from_stdin or add_noqa or verify or show_settings or show_files:
            raise fail("--watch cannot be combined with stdin, --add-noqa, --verify, --show-settings or --show-files")
        context = click.get_current_context()
        _watch(paths or (".",), lambda: context.invoke(check, **{**context.params, "watch": False}))
    selection = SelectionLayer(_selectors(select), _selectors(ignore) or (), _selectors(extend_select) or ())
    fix_selection = SelectionLayer(_selectors(fixable), _selectors(unfixable) or (), _selectors(extend_fixable) or ())
    try:
        resolver = Resolver(
            Overrides(selection, unsafe_fixes, config_path, fix_selection, _selectors(extend_exclude) or ())
        )
        if show_project:
            _show_project(paths or (".",), resolver)
            return
        if show_settings or show_files:
            with _reader_may_stop():
                _show(paths or (".",), resolver, cache_dir, settings=show_settings)
            return
        request = Request(
            paths=paths or (".",),
            stdin=_binary(sys.stdin).read() if from_stdin else None,
            stdin_filename=stdin_filename,
            fix=fix or diff,
            write=not diff,
            use_cache=not no_cache,
            prefilter=not no_prefilter,
            jobs=jobs,
            cache_dir=cache_dir,
            **({"file_budget": file_timeout} if file_timeout else {}),
        )
        if not no_cache and not quiet:
            _warn_unusable_cache(cache_dir, paths or (".",))
        progress = ProgressBar(color=_use_color(color, sys.stderr)) if not quiet else None
        try:
            run = run_engine(request, resolver, progress) if progress else run_engine(request, resolver)
        finally:
            if progress:
                progress.close()
    except ConfigError as error:
        raise fail(str(error)) from None
    except Exception as error:  # noqa: BLE001 - a bug must still exit 2, with a trace under -v
        if verbose:
            import traceback

            traceback.print_exc()
        raise fail(f"internal error: {type(error).__name__}: {error}") from None

    if add_noqa:
        _add_noqa(run, quiet)
    from accumlint.report import ReportOptions
    from accumlint.report import render as render_report

    # `--output-format FORMAT:FILE,...`: the one entry without a file is printed (None: none is).
    printed = next((name for name, path in output_format if path is None), None)
    if show_source and printed in ("concise", "text"):
        printed = "full"
    fixed_to_stdout = request.stdin if from_stdin and fix else None
    report = ReportOptions(
        statistics=statistics,
        quiet=quiet,
        fix=fix or diff,
        color=color == "always" if output_file else _use_color(color, sys.stderr if fixed_to_stdout else sys.stdout),
    )
    # with --diff, like ruff: exit 1 only when there is something to fix
    findings = any(f.changed for f in run.files) if diff else bool(run.diagnostics)
    with _reader_may_stop():
        _print_results(run, printed, report, diff=diff, fixed_to_stdout=fixed_to_stdout, output_file=output_file)
    for name, path in output_format:
        if path is not None:
            _write_report(path, render_report(name, run, report._replace(color=False)))
    if verify:
        findings |= _verify_fixes(run, resolver, to_stderr=printed not in ("concise", "full", "text", "grouped"))
    if verbose:
        _print_verbose(run, resolver, started)
    if any(_is_error(d) for d in run.diagnostics):
        raise click.exceptions.Exit(EXIT_ERROR)
    raise click.exceptions.Exit(EXIT_FINDINGS if findings and not exit_zero else EXIT_OK)


def _watch(paths: tuple[str, ...], check_once: Callable[[], None]) -> None:
    """`--watch`: check, then check again after every change to a checked file or a configuration,
    until interrupted (Ctrl-C: exit status 130). A run's errors are printed and watching goes on."""
    try:
        import watchfiles
    except ModuleNotFoundError:
        raise fail(f"--watch needs watchfiles: {install_hint('watch')}") from None

    class Sources(watchfiles.DefaultFilter):
        """Python files, notebooks, and the files that change what is checked; not caches or VCS folders."""

        names = ("pyproject.toml", ".gitignore")

        def __call__(self, change, path: str) -> bool:
            name = os.path.basename(path)
            return (name.endswith((".py", ".ipynb")) or name in self.names) and super().__call__(change, path)

    watched = [path for path in paths if os.path.exists(path)]
    if not watched:
        raise fail("--watch: none of the given paths exists")

    def once() -> None:
        try:
            check_once()
        except click.exceptions.Exit:  # every check ends so; an error was printed, a later change may mend it
            pass

    once()
    click.echo("Watching for file changes (Ctrl-C to stop).", err=True)
    try:
        for changes in watchfiles.watch(*watched, watch_filter=Sources()):
            click.clear()
            count = len({path for _, path in changes})
            click.echo(f"{count} file{'s' * (count != 1)} changed; checking again.", err=True)
            once()
            click.echo("Watching for file changes (Ctrl-C to stop).", err=True)
    except KeyboardInterrupt:  # the signal `main` turned into Stopped, as watchfiles reports it
        raise Stopped(_received[0] if _received else signal.SIGINT) from None
    raise click.exceptions.Exit(EXIT_OK)


def _write_report(path: str, text: str) -> None:
    """Write a report file whole (a reader never sees half of one), or exit 2 saying why not.
    A path that is not a regular file (`/dev/stdout`, a named pipe) is written as a stream."""
    import stat

    from accumlint.source.files import WriteRefused, write_atomic

    data = text.encode("utf-8", "surrogateescape")
    try:
        existed = os.path.exists(path)
        if existed and not stat.S_ISREG(os.stat(path).st_mode):
            with open(path, "wb") as stream:
                stream.write(data)
            return
        write_atomic(path, data)
        if not existed:  # a new file gets the mode `open` would give it, not the temporary file's 0600
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(path, 0o666 & ~umask)
    except WriteRefused as refusal:
        raise fail(f"{path}: cannot write the report: {refusal.message}") from None
    except OSError as error:
        raise fail(f"{path}: cannot write the report: {error.strerror or error}") from None


def _show(paths: tuple[str, ...], resolver, cache_dir: Optional[str], *, settings: bool) -> None:
    """`--show-settings` (for the first path) or `--show-files` (every file a check would read)."""
    from accumlint.check.adoption import settings_lines
    from accumlint.check.cache import cache_directory, cache_root
    from accumlint.check.engine import discovered

    if settings:
        first = paths[0] if paths[0] != "-" else "."
        chosen = cache_directory(cache_dir, paths)
        for line in settings_lines(first, resolver.settings_for(first), cache_root(chosen) or chosen):
            click.echo(line)
        return
    for source in sorted(discovered(paths, resolver), key=lambda source: source.display):
        click.echo(source.display)


def _show_project(paths: tuple[str, ...], resolver) -> None:
    """`--show-project`: the root, then each checked module with what it reads of the project."""
    from accumlint.check.analysis import _shown
    from accumlint.check.engine import discovered
    from accumlint.project import view_for

    roots: set[str] = set()
    lines: list[str] = []
    for source in sorted(discovered(paths, resolver), key=lambda source: source.display):
        if not source.display.endswith(".py") or source.error is not None or not os.path.isfile(source.display):
            continue  # a FIFO or a device is never opened
        try:
            with open(source.display, encoding="utf-8", errors="replace") as handle:
                view = view_for(source.display, handle.read())
        except OSError:
            continue
        if view is None:
            continue
        roots.add(view.root)
        lines.append(source.display)
        facts, errors = view.configs()
        for module in view.imported_modules():
            lines.append(f"  reads {_shown(module)}")
        for config in [c.path for c in facts] + [e.path for e in errors]:
            lines.append(f"  reads {_shown(config)} (configuration)")
    for root in sorted(roots):
        click.echo(f"project root: {root}")
    for line in lines:
        click.echo(line)


def _warn_unusable_cache(cache_dir: Optional[str], paths: tuple[str, ...]) -> None:
    """One line when the chosen cache folder, and the `.accumlint_cache` inside it, both hold
    files accumlint did not write: accumlint writes into neither, and caches nothing."""
    from accumlint.check.cache import DEFAULT_DIRECTORY, cache_directory, cache_root

    chosen = cache_directory(cache_dir, paths)
    if cache_root(chosen) is None:
        click.echo(
            f"accumlint: warning: results are not cached: {chosen} and {chosen / DEFAULT_DIRECTORY} hold files "
            "accumlint did not write (name a new or empty folder with --cache-dir)",
            err=True,
        )


def _add_noqa(run, quiet: bool) -> None:
    """`--add-noqa`: write the comments, say how many, and exit (0, or 2 if a file could not be checked)."""
    from accumlint.check.adoption import add_noqa_to_run

    outcome = add_noqa_to_run(run)
    for where in outcome.skipped:
        click.echo(f"accumlint: warning: {where}: no `# noqa` added (Python's tokenizer cannot read the file)", err=True)
    for error in outcome.errors:
        click.echo(f"accumlint: error: {error}", err=True)
    for d in run.diagnostics:
        if _is_error(d):
            click.echo(f"{d.path}:{d.line}:{d.column}: {d.name.replace('-', ' ')}: {d.message}", err=True)
    if not quiet:
        count = outcome.added
        click.echo(f"Added {count} noqa directive{'s' * (count != 1)} in {outcome.files} file{'s' * (outcome.files != 1)}.", err=True)
    failed = outcome.errors or any(_is_error(d) for d in run.diagnostics)
    raise click.exceptions.Exit(EXIT_ERROR if failed else EXIT_OK)


def _use_color(choice: str, stream) -> bool:
    """Colour for a stream: `--color`, else NO_COLOR / FORCE_COLOR, else whether it is a
    terminal that is not `TERM=dumb` (a terminal that cannot show escape sequences)."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _is_error(diagnostic) -> bool:
    from accumlint.check.engine import is_error

    return is_error(diagnostic)


def _print_results(
    run,
    output_format: Optional[str],
    options,
    *,
    diff: bool,
    fixed_to_stdout: Optional[bytes],
    output_file: Optional[str] = None,
) -> None:
    """Print findings, diffs or fixed code on the right streams.

    `fixed_to_stdout` is the code read from stdin, when `--fix -` prints the
    fixed code: code that cannot be read or parsed is printed back unchanged,
    so an editor that pipes its buffer through never loses it. The report (or
    the diff) goes to `output_file` when one is given; `output_format` None:
    every report has a file of its own, nothing is printed.
    """
    from accumlint.report import render
    from accumlint.report.text import diff as coloured_diff

    def emit(text: str, err: bool = False) -> None:
        if output_file is not None:
            _write_report(output_file, text)
        else:
            click.echo(text, nl=False, err=err, color=options.color)

    if not run.files and not options.quiet:
        click.echo("accumlint: warning: no Python files or notebooks found under the given paths", err=True)
    unsettled = [result.path for result in run.files if not result.converged]
    if unsettled:
        from accumlint.check.fixes import MAX_ROUNDS

        for path in unsettled:
            message = f"fixes did not settle in {MAX_ROUNDS} rounds; the findings of the last round's code are reported"
            click.echo(f"accumlint: warning: {path}: {message}", err=True)
    if diff:
        diffs = [f.document.diff(f.original) for f in run.files if f.changed]
        emit(coloured_diff("".join(diffs), options.color))
        click.echo(render("text", run, options._replace(quiet=True, statistics=False, color=False)), nl=False, err=True)
        fixed = sum(len(f.fixed) for f in run.files)
        if not options.quiet:
            remaining = len(run.diagnostics)
            click.echo(f"Would fix {fixed} error{'s' * (fixed != 1)} ({remaining} remaining).", err=True)
        return
    if fixed_to_stdout is not None:
        document = run.files[0].document
        _binary(sys.stdout).write(fixed_to_stdout if document is None else document.encoded())
    if output_format is not None:
        emit(render(output_format, run, options), err=fixed_to_stdout is not None)


def _verify_fixes(run, resolver, to_stderr: bool) -> bool:
    """`--fix --verify`: run the verifier on every fixed file; True if a fix is not equivalent.

    The file's `[tool.accumlint.verify]` settings are passed on.
    """
    try:
        from accumlint.verify.fixcheck import verify_fixed_file
    except ImportError as error:
        raise fail(f"--verify is not available: {error} ({install_hint('verify')})") from None
    failed = False
    for result in run.files:
        if not result.changed:
            continue
        if not result.path.endswith(".py"):
            click.echo(f"{result.path}: not verifiable (only .py files are verified)", err=to_stderr)
            continue
        try:
            outcomes = verify_fixed_file(result.path, settings=resolver.settings_for(result.path).config.verify)
        except Exception as error:  # noqa: BLE001 - the user's code runs here
            click.echo(f"{result.path}: not verifiable ({type(error).__name__}: {error})", err=to_stderr)
            continue
        for outcome in outcomes:
            status: str = outcome.status
            if status == "not verifiable" and outcome.reason:
                status = f"{status} ({outcome.reason})"
            failed |= outcome.status == "not equivalent"
            click.echo(f"{result.path}::{outcome.function}: {status}", err=to_stderr)
    return failed


def _print_verbose(run, resolver, started: float) -> None:
    configs = ", ".join(str(path) for path in resolver.config_paths()) or "none"
    click.echo(
        f"accumlint {accumlint.__version__}: {len(run.files)} files checked, {run.analysed} analysed, "
        f"{run.cache_hits} from cache, {run.workers} process{'es' * (run.workers != 1)}, "
        f"{time.perf_counter() - started:.2f}s; configuration: {configs}",
        err=True,
    )
    for result in run.files:
        if result.rounds:
            click.echo(f"accumlint: {result.path}: fixed in {result.rounds} round{'s' * (result.rounds != 1)}", err=True)


@cli.command()
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules(output_format: str) -> None:
    """List the rules: code, name, fix kind and summary (then the checks of noqa comments)."""
    if output_format == "json":
        import json

        rows = [
            {"code": r.code, "name": r.name, "fix": r.fix, "summary": r.summary, "any_loop": r.any_loop}
            for r in RULES
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    name_width = max(len(r.name) for r in ALL_RULES)
    click.echo(f"{'code':<6} {'name':<{name_width}} {'fix':<6} summary")
    for r in RULES:
        click.echo(f"{r.code:<6} {r.name:<{name_width}} {r.fix:<6} {r.summary}")
    click.echo("\nChecks of the suppression comments (not counted among the rules above):")
    for r in SUPPRESSION_RULES:
        click.echo(f"{r.code:<6} {r.name:<{name_width}} {r.fix:<6} {r.summary}")


@cli.command()
@click.argument("rule")
def explain(rule: str) -> None:
    """Print a rule's document (by code, GA201, or name, missing-loss-scaling): what, why, an example and its fix."""
    key = rule.strip()
    info = RULES_BY_CODE.get(key.upper()) or RULES_BY_NAME.get(key.lower())
    if info is None:
        raise fail(f"unknown rule {key!r}; `accumlint rules` lists their codes and names")
    try:
        from accumlint.rules.docs import rule_document
    except ImportError as error:
        raise fail(f"rule documents are not available in this installation ({error})") from None
    try:
        document = rule_document(info.code)
    except (OSError, KeyError, LookupError) as error:
        raise fail(f"no document for {info.code} ({error})") from None
    click.echo(document.rstrip("\n"))


@cli.command()
@click.option("--cache-dir", type=click.Path(file_okay=False), help="The cache to remove (default: the project root's).")
def clean(cache_dir: Optional[str]) -> None:
    """Remove the cache of results (for the project of the current folder).

    Only a folder accumlint marked as its cache is touched, and only the files
    accumlint wrote there (see `accumlint.check.cache`)."""
    from accumlint.check.cache import cache_directory
    from accumlint.check.cache import clean as remove_cache

    chosen = cache_directory(cache_dir)
    try:
        cleaned = remove_cache(chosen)
    except OSError as error:
        raise fail(f"cannot remove the cache at {chosen}: {error.strerror or error}") from None
    if cleaned.directory is None:
        click.echo(f"No accumlint cache at {chosen}")
    elif cleaned.kept:
        kept = ", ".join(cleaned.kept)
        click.echo(f"Removed accumlint's files from {cleaned.directory}; kept what accumlint did not write: {kept}")
    else:
        click.echo(f"Removed {cleaned.directory}")


class Stopped(BaseException):
    """A signal turned into an exception, so that cleanups run (workers ended, no temporary files).

    A BaseException that is not KeyboardInterrupt: click would turn that into
    "Aborted!" and exit 1, and `except Exception` on the way must not catch it.
    """

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.status = 128 + number  # what shells report for a process ended by that signal
        self.name = signal.Signals(number).name


# A write to a stream (no file name) failing with these means the output is gone.
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EPIPE, errno.EBADF, errno.EIO})


# The last signal `_stop` turned into an exception: watchfiles swallows the exception and
# raises KeyboardInterrupt in its place, whatever the signal was (`_watch`).
_received: list[int] = []


def _stop(number: int, frame: object) -> None:
    _received[:] = [number]
    raise Stopped(number)


def _drop_standard_output() -> None:
    """Send what is still to be written to standard output nowhere (the interpreter's
    last flush must not fail again with a traceback)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        pass


@contextmanager
def _reader_may_stop() -> Iterator[None]:
    """A reader that stops early (`accumlint check | head -1`) closes the pipe: the rest of
    the output is dropped quietly and the run ends with its own exit status, as other
    command-line tools do."""
    try:
        yield
    except BrokenPipeError:
        _drop_standard_output()


def _output_failed(error: OSError) -> int:
    """One line for a standard output that cannot be written (full, closed); exit status 2.
    A reader that stopped reading (a broken pipe) is not an error: nothing is said."""
    _drop_standard_output()
    if error.errno == errno.EPIPE:
        return EXIT_OK
    click.echo(f"accumlint: error: cannot write to standard output: {error.strerror or error}", err=True)
    return EXIT_ERROR


def main() -> None:
    """Console-script entry point: exit 130 on SIGINT and 143 on SIGTERM (after cleaning up),
    and 2 with one line when standard output cannot be written."""
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), _stop)
    if sys.stdout is None:  # started with standard output closed (`>&-`)
        click.echo("accumlint: error: cannot write to standard output: it is closed", err=True)
        sys.exit(EXIT_ERROR)
    if isinstance(sys.stdout, io.TextIOWrapper):  # a file name that is not UTF-8 prints as its own bytes
        sys.stdout.reconfigure(errors="surrogateescape")
    try:
        try:
            cli(prog_name="accumlint")
            status = EXIT_OK
        except SystemExit as exit_request:
            code = exit_request.code
            status = EXIT_OK if code is None else code if isinstance(code, int) else EXIT_ERROR
        sys.stdout.flush()
    except Stopped as stopped:
        click.echo(f"accumlint: interrupted ({stopped.name})", err=True)
        status = stopped.status
    except OSError as error:
        if error.filename is not None or error.errno not in _OUTPUT_ERRNOS:
            raise  # not about the output stream
        status = _output_failed(error)
    sys.exit(status)


def run() -> None:
    """The `accumlint` command (console script, `python -m accumlint`, `python -m
    accumlint.cli`): `main()`, then the process ends at once, its output flushed and its
    exit handlers run, skipping the interpreter's teardown (`accumlint.compat.quick_exit`).

    The interpreter's own teardown would free every module and object one by one,
    for a process that is ending anyway (a pre-commit hook pays it on every commit).
    Anything unusual takes the interpreter's normal exit: an exception, a status
    that is not a number, an output that cannot be flushed, another thread still
    running, the verifier's runs (torch and CUDA tear down state of their own), a
    tracer or profiler, or a `__main__` that is not the entry point's own."""
    try:
        main()
    except SystemExit as exit_request:
        threads = sys.modules.get("threading")  # never imported: no other thread can exist
        if (
            type(exit_request.code) is not int
            or (threads is not None and threads.active_count() != 1)
            or "torch" in sys.modules
            or not may_exit_now(run)
        ):
            raise
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (AttributeError, OSError, ValueError):
            raise exit_request from None
        exit_now(exit_request.code)


if __name__ == "__main__":
    run()
