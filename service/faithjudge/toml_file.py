"""Reading a FaithJudge TOML file: ``faithjudge.toml`` holds the gate's tables and, for
``faithjudge score --config``, a ``[score]`` table; one reader serves both (standard library
only, so ``score`` does not load the report libraries to read it)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from faithjudge.errors import ConfigError

__all__ = ["read_toml"]


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
