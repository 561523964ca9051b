"""Knowledge bases: loading, validation and question lookup (the I/O edge of the KB).

A KB file is JSON: ``{"kb_id", "version", "description", "entries": {question: KBEntry}}``.
Every entry is validated at load with the pydantic ``KBEntry`` and the whole file with
``schemas/knowledge_base.schema.json``; a bad file fails loudly with the path of the offending
node. Lookup tolerates case, whitespace and a missing or different trailing option list, and is
exact about everything else.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from faithjudge_client.lines import KBAnswer, KBEntry
from pydantic import ValidationError

from faithjudge.assets import asset_dir
from faithjudge.assets.schemas import kb_validator
from faithjudge.errors import ConfigError, UnknownQuestionError

__all__ = [
    "OPTIONS_SUFFIX",
    "KnowledgeBase",
    "entry_for_answer",
    "fold",
    "load_knowledge_base",
    "no_duplicate_keys",
    "question_key",
    "question_options",
    "resolve_kb",
]

OPTIONS_SUFFIX = re.compile(r"\s*\(([^()]*)\)\s*$")
_OPTION_SPLIT = re.compile(r",|/|\bor\b")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def fold(text: str) -> str:
    return " ".join(text.casefold().split())


def question_key(question: str) -> str:
    """The lookup key of a question: case-folded, whitespace collapsed, option list dropped."""
    return fold(OPTIONS_SUFFIX.sub("", question))


def question_options(question: str) -> tuple[str, ...] | None:
    """The options of a question's trailing parenthesised list (``(yes or no)``), or None."""
    match = OPTIONS_SUFFIX.search(question)
    if match is None:
        return None
    options = tuple(fold(part) for part in _OPTION_SPLIT.split(match.group(1)))
    return tuple(option for option in options if option) or None


@dataclass(frozen=True, slots=True)
class KnowledgeBase:
    """A loaded, validated KB. Build it with ``load_knowledge_base``."""

    id: str
    version: str
    description: str
    sha256: str
    path: Path
    entries: Mapping[str, KBEntry] = field(repr=False, compare=False)
    _index: Mapping[str, str] = field(repr=False, compare=False)

    @property
    def questions(self) -> tuple[str, ...]:
        """The questions as written in the KB file."""
        return tuple(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, question: object) -> bool:
        return isinstance(question, str) and question_key(question) in self._index

    def lookup(self, question: str) -> KBEntry:
        """The entry of ``question``; raises UnknownQuestionError (field ``question``) if none."""
        if isinstance(question, str):
            written = self._index.get(question_key(question))
            if written is not None:
                return self.entries[written]
        keys = list(self._index)
        close = difflib.get_close_matches(question_key(str(question)), keys, n=1, cutoff=0.8)
        hint = f"; closest KB question: {self._index[close[0]]!r}" if close else ""
        raise UnknownQuestionError(
            f"no knowledge-base entry for question {question!r} in KB {self.id} "
            f"v{self.version} ({len(self)} questions){hint}; pass kb_entry inline or add the "
            "question to the KB",
            field="question",
        )


def entry_for_answer(entry: KBEntry, answer: str, *, field: str = "ground_truth") -> KBAnswer:
    """The criteria of ``answer`` in ``entry`` (case- and whitespace-insensitive).

    Raises UnknownQuestionError (a UserInputError, failure stage ``kb``) naming ``field`` and the
    entry's options when ``answer`` is not one of them.
    """
    if isinstance(answer, str):
        wanted = fold(answer)
        for option, criteria in entry.answers.items():
            if fold(option) == wanted:
                return criteria
    raise UnknownQuestionError(
        f"answer {answer!r} is not an option of the knowledge-base entry; "
        f"options: {', '.join(entry.answers)}",
        field=field,
    )


# ---------------------------------------------------------------------------- loading


def resolve_kb(path_or_name: str | Path) -> Path:
    text = str(path_or_name)
    if isinstance(path_or_name, Path) or "/" in text or "\\" in text or text.endswith(".json"):
        path = Path(path_or_name)
    else:
        if not _NAME.fullmatch(text):
            raise ConfigError(f"invalid knowledge-base name {text!r}")
        path = asset_dir("knowledge_base") / f"{text}.json"
    if not path.is_file():
        raise ConfigError(f"knowledge-base file not found: {path}")
    return path


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen[key] = value
    return seen


def _node_path(parts: Sequence[int | str]) -> str:
    """``entries['Q'].answers.yes.at_least_k_of[0].k`` from a sequence of keys and indices."""
    out: list[str] = []
    for i, part in enumerate(parts):
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif i == 1 and parts[0] == "entries":
            out.append(f"[{part!r}]")
        else:
            out.append(f".{part}" if out else part)
    return "".join(out)


def _validate_entry(path: Path, question: str, node: Any) -> KBEntry:
    try:
        entry = KBEntry.model_validate(node)
    except ValidationError as exc:
        problems = "; ".join(
            f"{_node_path(('entries', question, *err['loc']))}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(f"{path}: invalid knowledge-base entry: {problems}") from None
    options = question_options(question)
    if options is not None:
        answers = {fold(a) for a in entry.answers}
        if answers != set(options):
            raise ConfigError(
                f"{path}: {_node_path(('entries', question, 'answers'))}: answer options "
                f"{sorted(answers)} differ from the question's options {sorted(options)}"
            )
    return entry


def _check_schema(path: Path, document: Any) -> None:
    # An independent second check against schemas/knowledge_base.schema.json; it runs after the
    # pydantic pass, whose messages are the friendlier ones.
    errors = sorted(kb_validator().iter_errors(document), key=lambda e: list(map(str, e.path)))
    if errors:
        first = errors[0]
        raise ConfigError(
            f"{path}: knowledge base breaks its JSON Schema at "
            f"{_node_path(tuple(first.absolute_path)) or '(root)'}: {first.message}"
        )


def load_knowledge_base(path_or_name: str | Path = "cxr_vqa") -> KnowledgeBase:
    """Load and validate a KB by bundled name (``cxr_vqa``) or by JSON file path.

    Raises ConfigError naming the file and the node at fault (for example
    ``entries['Is ...'].answers.yes.at_least_k_of[0].k``) when the KB is malformed.
    """
    path = resolve_kb(path_or_name)
    raw = path.read_bytes()
    try:
        document = json.loads(raw, object_pairs_hook=no_duplicate_keys)
    except ValueError as exc:  # includes UnicodeDecodeError and duplicate keys
        raise ConfigError(f"{path}: not a valid JSON knowledge base: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not a valid JSON knowledge base: nested too deeply") from None
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: a knowledge base must be a JSON object")
    for key in ("kb_id", "version"):
        if not isinstance(document.get(key), str) or not document[key].strip():
            raise ConfigError(f"{path}: {key!r} must be a non-empty string")
    if not isinstance(document.get("description", ""), str):
        raise ConfigError(f"{path}: 'description' must be a string")
    unknown = sorted(set(document) - {"$schema", "kb_id", "version", "description", "entries"})
    if unknown:
        raise ConfigError(f"{path}: unknown top-level keys {unknown}")
    raw_entries = document.get("entries")
    if not isinstance(raw_entries, dict) or not raw_entries:
        raise ConfigError(f"{path}: 'entries' must be a non-empty object of question -> entry")

    entries: dict[str, KBEntry] = {}
    index: dict[str, str] = {}
    for question, node in raw_entries.items():
        key = question_key(question)
        if not key:
            raise ConfigError(f"{path}: entries[{question!r}]: empty question text")
        if key in index:
            raise ConfigError(
                f"{path}: entries[{question!r}] and entries[{index[key]!r}] are the same "
                "question once case, whitespace and the option list are ignored"
            )
        entries[question] = _validate_entry(path, question, node)
        index[key] = question
    _check_schema(path, document)

    return KnowledgeBase(
        id=document["kb_id"],
        version=document["version"],
        description=document.get("description", ""),
        sha256=hashlib.sha256(raw).hexdigest(),
        path=path,
        entries=MappingProxyType(entries),
        _index=MappingProxyType(index),
    )
