"""Named registries of pluggable parts: metrics, lexicon rules, judge backends, job stores.

One mechanism for all of them. ``register(name, entry)`` takes the object itself or a lazy
``"package.module:object"`` reference that is imported the first time the entry is used, so
listing what is registered (help texts, error messages, URL-scheme checks) never imports an
optional SDK or a database driver, and a module can be registered by the very module it would
otherwise have to import (no import cycle).

Registering a name twice with the same entry is allowed (a plugin imported twice); a different
entry under a name already taken raises :class:`NameClash` unless ``replace=True``. Looking up a
name that is not registered raises :class:`UnknownName`, which lists the known names.

A registry with an entry-point ``group`` (``faithjudge.judges``, ``faithjudge.metrics``,
``faithjudge.lexicon_rules``, ``faithjudge.job_stores``) also holds what installed packages
declare there: each entry point ``name = package.module:object`` is one more entry after those
registered in code, read from
the packages' metadata the first time the registry is read, and imported only when the entry
is used, like a lazy reference. An entry point that cannot be imported, or whose object the
registry's ``adapt`` refuses, raises :class:`PluginError` naming the distribution and the entry
point, and only where that entry is used: listing the names never fails. An entry point under a
name already registered in code is passed over with a :class:`PluginWarning`. A group that was
renamed stays readable as one of the registry's ``old_groups`` (``faithjudge.evaluators``, now
``faithjudge.judges``): its entry points register after the group's own, each with a
``DeprecationWarning`` naming the group to move to.

Pure and a leaf: the standard library only, so the metric catalogue can build on it.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

__all__ = [
    "NameClash",
    "PluginError",
    "PluginWarning",
    "Registry",
    "RegistryError",
    "UnknownName",
    "refresh_plugins",
    "resolve_ref",
]

T = TypeVar("T")

_REF = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


class RegistryError(ValueError):
    """A registration or a lookup that cannot be honoured; the message says why."""


class NameClash(RegistryError):
    """A name already holds another entry (pass ``replace=True`` to override it on purpose)."""


class UnknownName(RegistryError, LookupError):
    """No entry under the name; the message lists the registered names."""


class PluginError(RegistryError):
    """An installed package's entry point that cannot be used; the message names the
    distribution, the entry point and why."""


class PluginWarning(UserWarning):
    """An installed package's entry point passed over (its name is registered in code)."""


@functools.cache
def _installed(group: str) -> tuple[importlib.metadata.EntryPoint, ...]:
    """The entry points of ``group`` in the installed packages, the first of a name on the path.

    ``importlib.metadata.entry_points()`` parses every package's metadata (about 20 ms, paid at
    every start-up of the CLI, whose help lists the backends); a package that never mentions
    the group is passed over on its ``entry_points.txt`` text alone (about 2 ms)."""
    seen: set[str] = set()
    found: list[importlib.metadata.EntryPoint] = []
    for dist in importlib.metadata.distributions():
        text = dist.read_text("entry_points.txt")
        if not text or group not in text:
            continue
        name = re.sub(r"[-_.]+", "-", dist.metadata["Name"] or "").lower()
        if name in seen:  # the same package further down the path: shadowed, as on import
            continue
        seen.add(name)
        found.extend(point for point in dist.entry_points if point.group == group)
    return tuple(found)


def refresh_plugins() -> None:
    """Read the installed packages again the next time a registry that has not yet been read
    looks for its entry points (after a package was installed into the running process)."""
    _installed.cache_clear()


def _origin(point: importlib.metadata.EntryPoint) -> str:
    """The distribution and the entry point, as a message names them."""
    dist = point.dist
    package = f"{dist.name} {dist.version}" if dist is not None else "an unnamed distribution"
    where = f"entry point {point.name} = {point.value} in group {point.group}"
    return f"the installed package {package} ({where})"


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
    plugin: importlib.metadata.EntryPoint | None = None
    """The entry point an installed package declared the entry with (None: registered in code)."""


class Registry(Generic[T]):
    """Entries of one kind by name, in registration order; ``kind`` names them in messages.

    ``group`` is the entry-point group installed packages add entries through, and ``adapt``
    turns the object such an entry point names into an entry (raising ``TypeError`` or
    ``ValueError`` with the reason it is refused); without it the object is the entry.
    ``old_groups`` are earlier names of ``group``, still read (a name the group itself
    declares wins).
    """

    def __init__(
        self,
        kind: str,
        *,
        group: str | None = None,
        adapt: Callable[[str, object], T] | None = None,
        old_groups: tuple[str, ...] = (),
    ) -> None:
        self.kind = kind
        self.group = group
        self.old_groups = old_groups
        self._adapt = adapt
        self._discovered = group is None
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
        if current is not None and current.plugin is not None:
            self._pass_over(current.plugin)  # what code registers wins, whatever came first
        elif current is not None and not replace:
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
        self._all().pop(name, None)
        self._values = None

    def names(self) -> tuple[str, ...]:
        """Every registered name, in registration order; imports nothing."""
        return tuple(self._all())

    def ref(self, name: str) -> str | None:
        """The lazy reference ``name`` was registered with, or its entry point's (None for an
        object)."""
        slot = self._slot(name)
        if slot.plugin is not None:
            return f"{slot.plugin.module}:{slot.plugin.attr}"
        return slot.entry if isinstance(slot.entry, str) else None

    def plugin(self, name: str) -> importlib.metadata.EntryPoint | None:
        """The entry point of the installed package ``name`` comes from (None: from code);
        imports nothing."""
        return self._slot(name).plugin

    def get(self, name: str) -> T:
        """The entry of ``name``, importing a lazy one on first use.

        Raises:
            UnknownName: listing the registered names.
            PluginError: an installed package's entry that cannot be loaded or is refused.
            RegistryError: a lazy reference that cannot be imported.
        """
        slot = self._slot(name)
        if not slot.loaded:
            if slot.plugin is not None:
                slot.resolved = self._load(name, slot.plugin)
            else:
                entry = slot.entry
                try:
                    slot.resolved = cast(T, resolve_ref(entry)) if isinstance(entry, str) else entry
                except RegistryError as exc:
                    raise RegistryError(f"{self.kind} {name!r}: {exc}") from exc.__cause__
            slot.loaded = True
        return cast(T, slot.resolved)

    def items(self) -> tuple[tuple[str, T], ...]:
        """(name, entry) of every registration, in order (lazy entries are imported)."""
        return tuple((name, self.get(name)) for name in self._all())

    def values(self) -> tuple[T, ...]:
        """Every entry, in registration order (lazy entries are imported)."""
        if self._values is None:
            self._values = tuple(self.get(name) for name in self._all())
        return self._values

    def loaded_values(self) -> tuple[T, ...]:
        """The entries already imported (or given as objects), in order; imports nothing."""
        return tuple(
            cast(T, slot.resolved if slot.loaded else slot.entry)
            for slot in self._all().values()
            if slot.loaded or (slot.plugin is None and not isinstance(slot.entry, str))
        )

    def __contains__(self, name: object) -> bool:
        return name in self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._all()))

    def __len__(self) -> int:
        return len(self._all())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._all())})"

    def _all(self) -> dict[str, _Slot[T]]:
        """The slots, with the installed packages' entry points once the registry is read."""
        if not self._discovered and self.group is not None:
            self._discovered = True
            for point in _installed(self.group):
                if point.name in self._slots:
                    self._pass_over(point)
                    continue
                self._slots[point.name] = _Slot(point.value, plugin=point)
            for old in self.old_groups:
                for point in _installed(old):
                    if point.name in self._slots:
                        # a package that declares the name in both groups, or one code took
                        if self._slots[point.name].plugin is None:
                            self._pass_over(point)
                        continue
                    warnings.warn(
                        f"{self.kind} {point.name!r} of {_origin(point)}: the group {old} is "
                        f"deprecated, declare the entry point in {self.group} instead",
                        DeprecationWarning,
                        stacklevel=3,
                    )
                    self._slots[point.name] = _Slot(point.value, plugin=point)
            self._values = None
        return self._slots

    def _load(self, name: str, point: importlib.metadata.EntryPoint) -> T:
        try:
            found = point.load()
        except Exception as exc:  # whatever the package's import raises, told as its fault
            raise PluginError(
                f"{self.kind} {name!r} from {_origin(point)} cannot be loaded: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if self._adapt is None:
            return cast(T, found)
        try:
            return self._adapt(name, found)
        except (TypeError, ValueError) as exc:
            raise PluginError(f"{self.kind} {name!r} from {_origin(point)}: {exc}") from exc

    def _pass_over(self, point: importlib.metadata.EntryPoint) -> None:
        warnings.warn(
            f"{self.kind} {point.name!r} of {_origin(point)} is passed over: the name is "
            "registered by FaithJudge or a plugin's code",
            PluginWarning,
            stacklevel=4,
        )

    def _slot(self, name: str) -> _Slot[T]:
        try:
            return self._all()[name]
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
