"""Named registries of pluggable parts: metrics, lexicon rules, evaluator backends, job stores.

One mechanism for all of them. ``register(name, entry)`` takes the object itself or a lazy
``"package.module:object"`` reference that is imported the first time the entry is used, so
listing what is registered (help texts, error messages, URL-scheme checks) never imports an
optional SDK or a database driver, and a module can be registered by the very module it would
otherwise have to import (no import cycle).

Registering a name twice with the same entry is allowed (a plugin imported twice); a different
entry under a name already taken raises :class:`NameClash` unless ``replace=True``. Looking up a
name that is not registered raises :class:`UnknownName`, which lists the known names.

Pure and a leaf: the standard library only, so the metric catalogue can build on it.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

__all__ = ["NameClash", "Registry", "RegistryError", "UnknownName", "resolve_ref"]

T = TypeVar("T")

_REF = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


class RegistryError(ValueError):
    """A registration or a lookup that cannot be honoured; the message says why."""


class NameClash(RegistryError):
    """A name already holds another entry (pass ``replace=True`` to override it on purpose)."""


class UnknownName(RegistryError, LookupError):
    """No entry under the name; the message lists the registered names."""


def resolve_ref(ref: str) -> object:
    """The object named by ``"package.module:attribute"`` (the attribute may be dotted).

    Raises:
        RegistryError: a malformed reference, a module that cannot be imported (with the
            import error) or a missing attribute.
    """
    if not _REF.match(ref):
        raise RegistryError(f"{ref!r} is not a 'package.module:object' reference")
    module_name, _, attribute = ref.partition(":")
    try:
        found: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise RegistryError(f"cannot import {module_name!r} for {ref!r}: {exc}") from exc
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise RegistryError(f"{module_name!r} has no {attribute!r} (from {ref!r})") from None
    return found


@dataclass(slots=True)
class _Slot(Generic[T]):
    entry: T | str
    resolved: T | None = None
    loaded: bool = False


class Registry(Generic[T]):
    """Entries of one kind by name, in registration order; ``kind`` names them in messages."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._slots: dict[str, _Slot[T]] = {}
        # every entry resolved, in order: read on hot paths (the catalogue, once per item)
        self._values: tuple[T, ...] | None = None

    def register(self, name: str, entry: T | str, *, replace: bool = False) -> None:
        """Register ``entry`` (an object, or a lazy ``"module:object"`` string) as ``name``.

        Raises:
            RegistryError: an empty name or a malformed reference.
            NameClash: ``name`` already holds a different entry and ``replace`` is False.
        """
        if not isinstance(name, str) or not name.strip():
            raise RegistryError(f"a {self.kind} needs a non-empty name, got {name!r}")
        if isinstance(entry, str) and not _REF.match(entry):
            raise RegistryError(
                f"{self.kind} {name!r}: {entry!r} is not a 'package.module:object' reference"
            )
        current = self._slots.get(name)
        if current is not None and not replace:
            if self._same(current, entry):
                return
            raise NameClash(
                f"{self.kind} {name!r} is already registered (as {self._shown(current)}); "
                "pass replace=True to override it"
            )
        self._slots[name] = _Slot(entry)
        self._values = None

    def unregister(self, name: str) -> None:
        """Forget ``name`` (nothing happens when it is not registered)."""
        self._slots.pop(name, None)
        self._values = None

    def names(self) -> tuple[str, ...]:
        """Every registered name, in registration order; imports nothing."""
        return tuple(self._slots)

    def ref(self, name: str) -> str | None:
        """The lazy reference ``name`` was registered with (None for an object)."""
        entry = self._slot(name).entry
        return entry if isinstance(entry, str) else None

    def get(self, name: str) -> T:
        """The entry of ``name``, importing a lazy one on first use.

        Raises:
            UnknownName: listing the registered names.
            RegistryError: a lazy reference that cannot be imported.
        """
        slot = self._slot(name)
        if not slot.loaded:
            entry = slot.entry
            try:
                slot.resolved = cast(T, resolve_ref(entry)) if isinstance(entry, str) else entry
            except RegistryError as exc:
                raise RegistryError(f"{self.kind} {name!r}: {exc}") from exc.__cause__
            slot.loaded = True
        return cast(T, slot.resolved)

    def items(self) -> tuple[tuple[str, T], ...]:
        """(name, entry) of every registration, in order (lazy entries are imported)."""
        return tuple((name, self.get(name)) for name in self._slots)

    def values(self) -> tuple[T, ...]:
        """Every entry, in registration order (lazy entries are imported)."""
        if self._values is None:
            self._values = tuple(self.get(name) for name in self._slots)
        return self._values

    def __contains__(self, name: object) -> bool:
        return name in self._slots

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._slots))

    def __len__(self) -> int:
        return len(self._slots)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._slots)})"

    def _slot(self, name: str) -> _Slot[T]:
        try:
            return self._slots[name]
        except KeyError:
            known = ", ".join(self._slots) or "none"
            raise UnknownName(f"unknown {self.kind} {name!r}; known: {known}") from None

    @staticmethod
    def _same(slot: _Slot[T], entry: T | str) -> bool:
        if slot.entry is entry or slot.entry == entry:
            return True
        # the object a lazy reference already resolved to, registered again directly
        return slot.loaded and slot.resolved is entry

    @staticmethod
    def _shown(slot: _Slot[T]) -> str:
        entry = slot.entry
        if isinstance(entry, str):
            return repr(entry)
        qualified = getattr(entry, "__qualname__", None)
        module = getattr(entry, "__module__", None)
        if isinstance(qualified, str) and isinstance(module, str):
            return f"{module}:{qualified}"
        return type(entry).__name__
