"""`[tool.accumlint]` configuration: lookup, validation, defaults and rule selection.

A configuration mistake must never be silently ignored (a misspelt `ignore`
would quietly turn a CI gate into noise), so every key and value type is
checked and errors name the key and the file. Selection follows ruff's
semantics, which users already know: a layer's `select` replaces what earlier
layers chose, and within a layer the most specific selector wins (`GA2` with
`ignore = ["GA201"]` keeps the other GA2xx rules).
"""

from __future__ import annotations

import os
import sys
import re
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple, Optional, Union

from accumlint.rules.catalog import ALL_RULES, codes_matching
from accumlint.source.files import MAX_FILE_SIZE, SourceError, read_bytes

ALL_CODES: tuple[str, ...] = tuple(rule.code for rule in ALL_RULES)
ALL_CODES_SET = frozenset(ALL_CODES)

PYPROJECT = "pyproject.toml"


class ConfigError(Exception):
    """A configuration that cannot be used; the message names the key and file."""


# The immutable records are NamedTuples: a frozen dataclass costs more to create
# (each generated method is compiled), and every start-up pays it.


class VerifySettings(NamedTuple):
    """`[tool.accumlint.verify]`: defaults for `accumlint verify`, validated here."""

    accum_steps: Optional[int] = None
    setup: Optional[str] = None
    device: Optional[str] = None
    dtype: Optional[str] = None
    windows: Optional[int] = None
    micro_batch: Optional[int] = None
    seed: Optional[int] = None
    tail: Optional[int] = None
    rtol: Optional[float] = None
    atol: Optional[float] = None
    eval_mode: Optional[bool] = None
    nproc: Optional[int] = None
    bind: tuple[str, ...] = ()
    arg: tuple[str, ...] = ()
    timeout: Optional[float] = None
    script_args: Union[None, str, tuple[str, ...]] = None


class SelectionLayer(NamedTuple):
    """One source of selectors (the config file, or the command line)."""

    select: Optional[tuple[str, ...]] = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()


class Config(NamedTuple):
    """The validated contents of one `[tool.accumlint]` table (empty if none)."""

    path: Optional[Path] = None
    selection: SelectionLayer = SelectionLayer()
    # Which enabled rules `--fix` may fix: `fixable` (default all), `unfixable`, `extend-fixable`,
    # resolved as a selection (a layer's `fixable` replaces, the most specific selector wins).
    fix_selection: SelectionLayer = SelectionLayer()
    exclude: tuple[str, ...] = ()
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    unsafe_fixes: bool = False
    optimizer_names: tuple[str, ...] = ()
    accumulation_names: tuple[str, ...] = ()
    verify: VerifySettings = VerifySettings()
    max_file_size: int = MAX_FILE_SIZE  # bytes: a larger file is reported, not read

    @property
    def root(self) -> Path:
        """Where relative patterns (`exclude`, `per-file-ignores`) are anchored."""
        return self.path.parent if self.path else Path.cwd()


class Overrides(NamedTuple):
    """What the command line says; None means "not given, use the config"."""

    selection: SelectionLayer = SelectionLayer()
    unsafe_fixes: Optional[bool] = None
    config_path: Optional[Path] = None
    fix_selection: SelectionLayer = SelectionLayer()
    extend_exclude: tuple[str, ...] = ()  # patterns relative to the current folder (`--extend-exclude`)


class Settings(NamedTuple):
    """Everything that decides how one file is checked."""

    config: Config
    enabled: frozenset[str]
    unsafe_fixes: bool
    # The configuration's patterns, compiled: (per-file-ignores matcher, codes) pairs, and
    # (exclude matcher, the folder its patterns are relative to) pairs.
    ignore_specs: tuple[tuple[Any, frozenset[str]], ...] = ()
    exclude_specs: tuple[tuple[Any, Path], ...] = ()
    fixable: frozenset[str] = ALL_CODES_SET

    def enabled_for(self, path: str) -> frozenset[str]:
        """Codes enabled for one file once `per-file-ignores` are applied."""
        if not self.ignore_specs:
            return self.enabled
        relative = _relative(path, self.config.root)
        removed: set[str] = set()
        for spec, codes in self.ignore_specs:
            if spec.match_file(relative):
                removed |= codes
        return self.enabled - removed

    def is_excluded(self, path: str, is_dir: bool = False) -> bool:
        """Whether `exclude` or `extend-exclude` (the config's or the command line's) removes this file or folder."""
        for spec, root in self.exclude_specs:
            relative = _relative(path, root)
            if spec.match_file(relative + "/" if is_dir else relative):
                return True
        return False


def _relative(path: str, root: Path) -> str:
    """The path as patterns see it: relative to the config's folder, with slashes."""
    return os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")


# ---------------------------------------------------------------- selection


def _expand(selector: str, origin: str) -> list[str]:
    if not selector.strip():
        raise ConfigError(f"{origin}: empty rule selector {selector!r} (a code like GA201, a prefix like GA2, or ALL)")
    codes = codes_matching(selector)
    if not codes:
        raise ConfigError(f"{origin}: unknown rule selector {selector!r} (run `accumlint rules`)")
    return codes


def resolve_selection(layers: Iterable[tuple[SelectionLayer, str]]) -> frozenset[str]:
    """Enabled codes after applying each layer in order (ruff's semantics)."""
    enabled = set(ALL_CODES)
    for layer, origin in layers:
        # (specificity, is_ignore) per code: the longest selector wins, ignore wins ties.
        best: dict[str, tuple[int, bool]] = {}
        selecting = list(layer.select or ()) + list(layer.extend_select)
        for selector, ignoring in [(s, False) for s in selecting] + [(s, True) for s in layer.ignore]:
            weight = 0 if selector.strip().upper() == "ALL" else len(selector.strip())
            for code in _expand(selector, origin):
                if code not in best or (weight, ignoring) >= best[code]:
                    best[code] = (weight, ignoring)
        if layer.select is not None:
            enabled = set()
        for code, (_, ignoring) in best.items():
            (enabled.discard if ignoring else enabled.add)(code)
    return frozenset(enabled)


# ---------------------------------------------------------------- loading


def _strings(value: Any, key: str, origin: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{origin}: `{key}` must be a list of strings, got {value!r}")
    return tuple(value)


def _patterns(value: Any, key: str, origin: str) -> tuple[str, ...]:
    """Strings in .gitignore syntax; a pattern pathspec cannot compile is an error here, not later."""
    patterns = _strings(value, key, origin)
    for pattern in patterns:
        _compile_pattern(pattern, key, origin)
    return patterns


def _gitignore(lines: Iterable[str]):
    """A .gitignore-syntax matcher; pathspec is imported only by configurations that have patterns."""
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(lines)


def _compile_pattern(pattern: str, key: str, origin: str):
    try:
        return _gitignore([pattern])
    except Exception as error:  # noqa: BLE001 - pathspec raises several kinds (and re.error)
        raise ConfigError(f"{origin}: `{key}` holds an invalid pattern {pattern!r}: {error}") from None


def _boolean(value: Any, key: str, origin: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{origin}: `{key}` must be true or false, got {value!r}")
    return value


def _positive_int(value: Any, key: str, origin: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{origin}: `{key}` must be a positive integer, got {value!r}")
    return value


def _integer(value: Any, key: str, origin: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{origin}: `{key}` must be an integer, got {value!r}")
    return value


def _non_negative(value: Any, key: str, origin: str, kind: type) -> Any:
    numeric = (int, float) if kind is float else (int,)
    if isinstance(value, bool) or not isinstance(value, numeric) or value < 0:
        raise ConfigError(f"{origin}: `{key}` must be a non-negative {kind.__name__}, got {value!r}")
    return kind(value)


def _dtype(value: Any, key: str, origin: str) -> str:
    if value not in ("float32", "float64"):
        raise ConfigError(f"{origin}: `{key}` must be \"float32\" or \"float64\", got {value!r}")
    return value


def _device(value: Any, key: str, origin: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"cpu|cuda(:\d+)?", value):
        raise ConfigError(f"{origin}: `{key}` must be \"cpu\", \"cuda\" or \"cuda:N\", got {value!r}")
    return value


def _seconds(value: Any, key: str, origin: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ConfigError(f"{origin}: `{key}` must be a positive number of seconds, got {value!r}")
    return float(value)


def _arguments(value: Any, key: str, origin: str) -> Union[str, tuple[str, ...]]:
    """A command line's arguments: one string (split as a shell would) or a list of strings."""
    return value if isinstance(value, str) else _strings(value, key, origin)


def _setup(value: Any, key: str, origin: str) -> str:
    if not isinstance(value, str) or ":" not in value:
        raise ConfigError(f"{origin}: `{key}` must be a string 'module:factory', got {value!r}")
    return value


def _per_file_ignores(value: Any, key: str, origin: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise ConfigError(f"{origin}: `{key}` must be a table of glob = [codes], got {value!r}")
    pairs = []
    for glob, codes in value.items():
        _compile_pattern(glob, key, origin)
        codes = _strings(codes, f"{key}.{glob}", origin)
        for code in codes:
            _expand(code, f"{origin}: `{key}.{glob}`")
        pairs.append((glob, codes))
    return tuple(pairs)


_VERIFY_KEYS: dict[str, Callable[[Any, str, str], Any]] = {
    "accum-steps": _positive_int,
    "setup": _setup,
    "device": _device,
    "dtype": _dtype,
    "windows": _positive_int,
    "micro-batch": _positive_int,
    "seed": _integer,
    "tail": lambda value, key, origin: _non_negative(value, key, origin, int),
    "rtol": lambda value, key, origin: _non_negative(value, key, origin, float),
    "atol": lambda value, key, origin: _non_negative(value, key, origin, float),
    "eval-mode": _boolean,
    "nproc": _positive_int,
    "bind": _strings,
    "arg": _strings,
    "timeout": _seconds,
    "script-args": _arguments,
}

_KEYS: dict[str, Callable[[Any, str, str], Any]] = {
    "select": _strings,
    "ignore": _strings,
    "extend-select": _strings,
    "fixable": _strings,
    "unfixable": _strings,
    "extend-fixable": _strings,
    "exclude": _patterns,
    "extend-exclude": _patterns,
    "per-file-ignores": _per_file_ignores,
    "unsafe-fixes": _boolean,
    "optimizer-names": _strings,
    "accumulation-names": _strings,
    "max-file-size": _positive_int,
    "verify": lambda value, key, origin: value,  # validated as its own table below
}


def _check_keys(table: dict, allowed: dict, section: str, origin: str) -> dict[str, Any]:
    values = {}
    for key, value in table.items():
        if key not in allowed:
            import difflib  # only for the error's hint: not paid by a valid configuration

            close = difflib.get_close_matches(key, list(allowed), n=1)
            hint = f" (did you mean `{close[0]}`?)" if close else f" (known keys: {', '.join(allowed)})"
            raise ConfigError(f"{origin}: unknown key `{key}` in [{section}]{hint}")
        values[key] = allowed[key](value, key, origin)
    return values


def parse_table(table: Any, path: Optional[Path]) -> Config:
    """Validate a `[tool.accumlint]` table (already decoded from TOML)."""
    origin = str(path) if path else "configuration"
    if not isinstance(table, dict):
        raise ConfigError(f"{origin}: [tool.accumlint] must be a table")
    values = _check_keys(table, _KEYS, "tool.accumlint", origin)
    verify_table = values.get("verify", {})
    if not isinstance(verify_table, dict):
        raise ConfigError(f"{origin}: `verify` must be a table [tool.accumlint.verify]")
    verify = _check_keys(verify_table, _VERIFY_KEYS, "tool.accumlint.verify", origin)
    selection = SelectionLayer(
        select=values.get("select"),
        ignore=values.get("ignore", ()),
        extend_select=values.get("extend-select", ()),
    )
    fix_selection = SelectionLayer(
        select=values.get("fixable"),
        ignore=values.get("unfixable", ()),
        extend_select=values.get("extend-fixable", ()),
    )
    resolve_selection([(selection, origin)])  # report unknown selectors now
    resolve_selection([(fix_selection, origin)])
    return Config(
        path=path,
        selection=selection,
        fix_selection=fix_selection,
        exclude=values.get("exclude", ()),
        extend_exclude=values.get("extend-exclude", ()),
        per_file_ignores=values.get("per-file-ignores", ()),
        unsafe_fixes=values.get("unsafe-fixes", False),
        optimizer_names=values.get("optimizer-names", ()),
        accumulation_names=values.get("accumulation-names", ()),
        max_file_size=values.get("max-file-size", MAX_FILE_SIZE),
        verify=VerifySettings(**{key.replace("-", "_"): value for key, value in verify.items()}),
    )


def _read_toml(path: Path) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: the same parser, from PyPI (a dependency there)
        import tomli as tomllib

    try:
        data = read_bytes(str(path))
    except SourceError as error:
        raise ConfigError(f"{path}: cannot read configuration: {error.message}") from None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ConfigError(f"{path}: invalid TOML: not UTF-8 (byte 0x{data[error.start]:02x} on line {line})") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid TOML: nested too deeply to read") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None


def load_config(path: Path) -> Optional[Config]:
    """The `[tool.accumlint]` table of one file, or None if it has none."""
    tool = _read_toml(path).get("tool")
    table = tool.get("accumlint") if isinstance(tool, dict) else None
    return None if table is None else parse_table(table, path)


def _found_config(path: Path) -> Optional[Config]:
    """`load_config` of a `pyproject.toml` met on the way up from a checked file. One that
    is not valid TOML and never names accumlint cannot hold its table (another tool's
    broken file, a sub-package's): it says nothing, and the run goes on; one that names it
    is the user's configuration, and its error stops the run."""
    try:
        return load_config(path)
    except ConfigError:
        try:
            if b"accumlint" not in read_bytes(str(path)):
                return None
        except SourceError:
            pass
        raise


class Resolver:
    """Finds the settings for each checked file, reading each config file once.

    The nearest `pyproject.toml` with a `[tool.accumlint]` table, upwards from
    the file, applies (or the one given with `--config`); the command line
    overrides it.
    """

    def __init__(self, overrides: Overrides = Overrides()) -> None:
        self.overrides = overrides
        self._by_dir: dict[str, Settings] = {}
        self._by_config: dict[Optional[Path], Settings] = {}
        self._fixed = None
        for pattern in overrides.extend_exclude:
            _compile_pattern(pattern, "--extend-exclude", "command line")
        if overrides.config_path is not None:
            path = overrides.config_path
            if not os.path.isfile(path):
                raise ConfigError(f"{path}: configuration file not found")
            path = path.resolve()
            self._fixed = self._settings(load_config(path) or Config(path=path))

    def settings_for(self, path: str, is_dir: Optional[bool] = None) -> Settings:
        """Settings for a file or folder given on the command line or found below one
        (`is_dir`: what the caller knows already, else the file system is asked)."""
        if self._fixed is not None:
            return self._fixed
        start = os.path.abspath(path)
        if is_dir is None:
            is_dir = os.path.isdir(start)
        return self._for_dir(start if is_dir else os.path.dirname(start))

    def config_paths(self) -> list[Path]:
        """The configuration files used so far (for `-v`)."""
        return sorted(path for path in self._by_config if path is not None)

    def _for_dir(self, directory: str) -> Settings:
        if directory in self._by_dir:
            return self._by_dir[directory]
        candidate = os.path.join(directory, PYPROJECT)
        config = _found_config(Path(candidate)) if os.path.isfile(candidate) else None
        if config is not None:
            settings = self._settings(config)
        else:
            parent = os.path.dirname(directory)
            settings = self._settings(Config()) if parent == directory else self._for_dir(parent)
        self._by_dir[directory] = settings
        return settings

    def _settings(self, config: Config) -> Settings:
        if config.path in self._by_config:
            return self._by_config[config.path]
        origin = str(config.path) if config.path else "configuration"
        enabled = resolve_selection(
            [(config.selection, origin), (self.overrides.selection, "command line")]
        )
        ignores = tuple(
            (_gitignore([glob]), frozenset(code for c in codes for code in codes_matching(c)))
            for glob, codes in config.per_file_ignores
        )
        fixable = resolve_selection(
            [(config.fix_selection, origin), (self.overrides.fix_selection, "command line")]
        )
        excludes = [(config.exclude + config.extend_exclude, config.root)]
        if self.overrides.extend_exclude:
            excludes.append((self.overrides.extend_exclude, Path.cwd()))
        unsafe = self.overrides.unsafe_fixes
        settings = Settings(
            config=config,
            enabled=enabled,
            unsafe_fixes=config.unsafe_fixes if unsafe is None else unsafe,
            ignore_specs=ignores,
            exclude_specs=tuple((_gitignore(patterns), root) for patterns, root in excludes if patterns),
            fixable=fixable,
        )
        self._by_config[config.path] = settings
        return settings
