"""Reading a FaithJudge TOML file: ``faithjudge.toml`` holds the gate's tables and, for
``faithjudge score --config``, a ``[score]`` table; one reader serves both (standard library
only, so ``score`` does not load the report libraries to read it), and the one wording of a
key or table its readers do not know, with the nearest known name when there is one."""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from faithjudge.errors import ConfigError

__all__ = ["read_toml", "unknown_keys"]


def read_toml(path: Path) -> dict[str, Any]:
    """The tables of the TOML file ``path``.

    Raises:
        ConfigError: the file cannot be read or is not TOML (naming it).
    """
    try:
        # utf-8-sig: the byte order mark Windows editors write is not TOML, and tomllib would
        # report it as an invalid statement
        return tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None


def unknown_keys(table: str | None, given: Iterable[str], known: Iterable[str]) -> str | None:
    """What is wrong with the keys ``given`` in ``[table]`` (the tables themselves when
    ``table`` is None) that are not ``known``, else None: each unknown name with the nearest
    known one (``unknown key 'thresholds' in [gate]; did you mean 'threshold'?``), or the known
    names where none is near. A typo then reads as one, not as a key the reader refuses."""
    names = sorted(set(known))
    problems = []
    for key in sorted(set(given) - set(names)):
        what = f"unknown section [{key}]" if table is None else f"unknown key {key!r} in [{table}]"
        near = difflib.get_close_matches(key, names, n=1)
        if near:
            problems.append(f"{what}; did you mean {_name(table, near[0])}?")
        else:
            listed = ", ".join(_name(table, n) for n in names)
            problems.append(f"{what}; known {'sections' if table is None else 'keys'}: {listed}")
    return " ".join(problems) or None


def _name(table: str | None, name: str) -> str:
    return f"[{name}]" if table is None else repr(name)
