"""Where the versioned data assets live: schemas, prompt sets, knowledge bases.

In a source checkout (and an editable install) they sit at the repository root; a wheel carries
them inside the package under ``faithjudge/_assets``.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from faithjudge.errors import ConfigError

__all__ = ["asset_dir", "sha256_file", "sha256_tree"]

_PACKAGE = Path(__file__).resolve().parents[1]  # the faithjudge package folder
_KINDS = ("schemas", "prompts", "knowledge_base")


@cache
def asset_dir(kind: str) -> Path:
    """The directory of one asset kind (``schemas``, ``prompts`` or ``knowledge_base``)."""
    if kind not in _KINDS:
        raise ValueError(f"unknown asset kind {kind!r}; expected one of {_KINDS}")
    for candidate in (_PACKAGE / "_assets" / kind, _PACKAGE.parents[1] / kind):
        if candidate.is_dir():
            return candidate
    raise ConfigError(
        f"asset directory {kind!r} not found next to {_PACKAGE}; reinstall faithjudge"
    )


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sha256_tree(root: Path, pattern: str = "*") -> str:
    """One hash over the relative names and bytes of every file under ``root`` (sorted)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob(pattern) if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()
