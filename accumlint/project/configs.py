"""Configuration files the code names by a literal path (README, "The project around a file").

A DeepSpeed JSON (`gradient_accumulation_steps`, `gradient_clipping`,
`zero_optimization.stage`), an accelerate config YAML (`distributed_type`,
`gradient_accumulation_steps`) and a YAML with `accumulate_grad_batches`.
They are read with the standard json module and PyYAML's safe loader; a file
that does not parse is one `ConfigError` with its line and column, never a
guess at what it meant.
"""

from __future__ import annotations

import functools
import json
import os
import stat
from dataclasses import dataclass
from typing import Any, Optional, Union, cast

MAX_CONFIG_BYTES = 1 << 20
_DEEPSPEED_KEYS = {"gradient_accumulation_steps", "zero_optimization", "gradient_clipping",
                   "train_micro_batch_size_per_gpu", "train_batch_size"}
_ACCELERATE_KEYS = {"distributed_type", "compute_environment"}
# The settings read from a configuration: a broken file that names none of them is no
# configuration of training (a data file, a JSON Lines file with a torn line) and says nothing.
_SETTINGS_READ = _DEEPSPEED_KEYS | _ACCELERATE_KEYS | {"accumulate_grad_batches"}


@dataclass(frozen=True)
class ConfigFacts:
    """What one configuration file says; `kind` is "deepspeed", "accelerate" or "lightning"."""

    path: str
    kind: str
    accumulation_steps: Optional[int] = None
    gradient_clipping: Optional[float] = None
    zero_stage: Optional[int] = None
    distributed_type: Optional[str] = None


@dataclass(frozen=True)
class ConfigError:
    """A named configuration file that does not parse."""

    path: str
    line: int
    column: int
    message: str


def read_config(path: str) -> Union[ConfigFacts, ConfigError, None]:
    """The facts of one configuration file, its parse error, or None (not one we read)."""
    try:
        status = os.stat(path)
        if not stat.S_ISREG(status.st_mode) or status.st_size > MAX_CONFIG_BYTES:
            return None  # a FIFO or a device is never opened
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.strip():
        return None  # an empty placeholder (a later step writes the real file) states nothing
    if path.endswith(".json"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            if error.msg == "Extra data" and _json_lines(text):
                return None  # one record per line: a data file the code reads, not a configuration
            if not any(key in text for key in _SETTINGS_READ):
                return None  # names none of the settings read: a data file, whatever its state
            return ConfigError(path, error.lineno, error.colno, f"invalid JSON: {error.msg}")
    else:
        data = _yaml(path, text)
        if isinstance(data, ConfigError):
            return data
    if not isinstance(data, dict):
        return None
    return _facts(path, data)


def _json_lines(text: str) -> bool:
    """Every non-blank line is a JSON document of its own (JSON Lines)."""
    try:
        for line in text.splitlines():
            if line.strip():
                json.loads(line)
    except json.JSONDecodeError:
        return False
    return True


def _yaml(path: str, text: str) -> Union[Any, ConfigError]:
    import yaml

    try:
        return yaml.load(text, Loader=_tag_tolerant_loader())
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        return ConfigError(path, line, column, f"invalid YAML: {error.problem or error.context or error}")
    except yaml.YAMLError as error:
        return ConfigError(path, 1, 1, f"invalid YAML: {error}")
    except RecursionError:
        return ConfigError(path, 1, 1, "invalid YAML: nested too deeply")


@functools.lru_cache(maxsize=1)
def _tag_tolerant_loader() -> type:
    """PyYAML's safe loader, reading an application's own tags (`!bool "True"`, `!!python/tuple
    [1, 2]`) as the plain value they tag: such a file is valid YAML that the safe loader
    cannot build, not a broken config. Nothing is constructed but plain data."""
    import yaml

    class TagTolerantLoader(yaml.SafeLoader):
        pass

    def plain(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(cast(yaml.ScalarNode, node))

    TagTolerantLoader.add_multi_constructor("!", plain)
    TagTolerantLoader.add_multi_constructor("tag:yaml.org,2002:python/", plain)
    return TagTolerantLoader


def _int(value: Any) -> Optional[int]:
    return value if type(value) is int else None


def _facts(path: str, data: dict) -> Optional[ConfigFacts]:
    if path.endswith(".json"):
        if not _DEEPSPEED_KEYS & set(data):
            return None
        zero = data.get("zero_optimization")
        clipping = data.get("gradient_clipping")
        return ConfigFacts(
            path, "deepspeed",
            accumulation_steps=_int(data.get("gradient_accumulation_steps")),
            gradient_clipping=float(clipping) if type(clipping) in (int, float) else None,
            zero_stage=_int(zero.get("stage")) if isinstance(zero, dict) else None,
        )
    if _ACCELERATE_KEYS & set(data):
        distributed = data.get("distributed_type")
        steps = _int(data.get("gradient_accumulation_steps"))
        nested = data.get("deepspeed_config")
        if steps is None and isinstance(nested, dict):  # where `accelerate config` writes it for DeepSpeed
            steps = _int(nested.get("gradient_accumulation_steps"))
        return ConfigFacts(path, "accelerate", accumulation_steps=steps,
                           distributed_type=distributed if isinstance(distributed, str) else None)
    found = _find_key(data, "accumulate_grad_batches", 0)
    if found is not _MISSING:
        return ConfigFacts(path, "lightning", accumulation_steps=_int(found))
    return None


_MISSING = object()


def _find_key(data: Any, key: str, depth: int) -> Any:
    if depth > 6 or not isinstance(data, dict):
        return _MISSING
    if key in data:
        return data[key]
    for value in data.values():
        found = _find_key(value, key, depth + 1)
        if found is not _MISSING:
            return found
    return _MISSING
