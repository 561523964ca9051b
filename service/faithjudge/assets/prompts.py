"""Judge prompt sets: loading, validation, hashing and rendering; the VLM inference prompt.

A prompt set is a folder with a ``manifest.json`` and, per metric, a system and a user template
(``string.Template`` syntax, so JSON braces in the text need no escaping). Templates are read
and checked once at load; ``PromptSet.sha256`` covers the manifest and every template it names,
and goes into each result's provenance.

Rendering treats every input as client-controlled:

* the CoT is placed verbatim (the judge must quote it exactly) inside a fence whose token is
  derived from the CoT itself, so the CoT cannot contain the line that closes it;
* every other input is rendered as JSON, which escapes newlines and quotes, so no value can
  start a line that looks like a role header or a boundary.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from string import Template
from types import MappingProxyType
from typing import Any

import orjson
from faithjudge_client.lines import Metric
from faithjudge_client.metric_catalogue import metric_names, metric_spec
from pydantic import BaseModel

from faithjudge.assets import asset_dir
from faithjudge.errors import ConfigError, UserInputError
from faithjudge.transport.chat import Message

__all__ = [
    "FENCE_BEGIN",
    "FENCE_END",
    "InferencePrompt",
    "PromptSet",
    "available_prompt_sets",
    "fence_cot",
    "fence_token",
    "load_inference_prompt",
    "load_prompt_set",
    "render_inference_prompt",
]

FENCE_BEGIN = "<<<BEGIN UNTRUSTED COT {token}>>>"
FENCE_END = "<<<END UNTRUSTED COT {token}>>>"
_FENCE_SALT = b"faithjudge-fence\0"

# Placeholders the renderer fills itself; callers pass ``cot`` instead.
_DERIVED = frozenset({"cot_block", "fence_token"})
# How each caller-supplied input is turned into text (all but the CoT become JSON).
_SCALAR = frozenset({"question", "ground_truth", "modification_description", "final_answer"})
_PRETTY_DOC = frozenset({"kb_entry"})
_COMPACT_DOC = frozenset({"context_flags"})


def _known(metric: str) -> frozenset[str]:
    """The placeholders the templates of ``metric`` may use (its catalogue inputs, derived)."""
    return frozenset(metric_spec(metric).prompt_inputs) | _DERIVED


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# Characters str.splitlines() (and some tokenizers) treat as line breaks that JSON leaves raw.
_RAW_BREAKS = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"}


@dataclass(frozen=True, slots=True)
class _MetricTemplates:
    system: Template
    user: Template
    required: frozenset[str]
    folded_text: str = ""
    """Both templates, case-folded once: the fence token must not occur in them either."""


@dataclass(frozen=True, slots=True)
class PromptSet:
    """A loaded, validated judge prompt set. Build it with ``load_prompt_set``."""

    id: str
    sha256: str
    description: str
    path: Path
    templates: Mapping[Metric, _MetricTemplates] = field(repr=False, compare=False)

    @property
    def metrics(self) -> tuple[Metric, ...]:
        return tuple(self.templates)

    def required_inputs(self, metric: Metric) -> frozenset[str]:
        """The keyword inputs ``render`` needs for ``metric`` (always including ``cot``)."""
        return self._metric(metric).required

    def render(self, metric: Metric, **inputs: Any) -> tuple[Message, ...]:
        """Render ``(system, user)`` messages for ``metric``.

        Pass ``cot=`` (the raw CoT) and the metric's other inputs, those its catalogue entry
        names in ``prompt_inputs``: ``question``, ``ground_truth``, ``modification_description``
        and ``final_answer`` are strings, ``kb_entry`` JSON text, a mapping or a pydantic model,
        ``context_flags`` JSON text, a mapping or None. A missing or unknown input raises
        UserInputError naming it.
        """
        templates = self._metric(metric)
        allowed = (_known(metric) - _DERIVED) | {"cot"}
        for name in inputs:
            if name not in allowed:
                raise UserInputError(
                    f"unknown input {name!r} for metric {metric}; expected {sorted(allowed)}",
                    field=name,
                )
        for name in sorted(templates.required):
            if name not in inputs:
                raise UserInputError(f"missing input {name!r} for metric {metric}", field=name)
        cot = inputs["cot"]
        if not isinstance(cot, str):
            raise UserInputError("the CoT must be a string", field="cot")

        values = {
            name: _render_value(name, value) for name, value in inputs.items() if name != "cot"
        }
        token = fence_token(cot, avoid=(*values.values(),), folded=(templates.folded_text,))
        values["fence_token"] = token
        values["cot_block"] = fence_cot(cot, token)
        return (
            Message("system", templates.system.substitute(values)),
            Message("user", templates.user.substitute(values)),
        )

    def _metric(self, metric: str) -> _MetricTemplates:
        try:
            return self.templates[metric]
        except KeyError:
            raise UserInputError(
                f"unknown metric {metric!r}; expected one of {list(self.templates)}",
                field="metric",
            ) from None


# ---------------------------------------------------------------------------- the fence


def fence_token(cot: str, *, avoid: tuple[str, ...] = (), folded: tuple[str, ...] = ()) -> str:
    """The per-CoT boundary token: ``COT-`` + 16 hex chars of a salted sha256 of the CoT.

    Deterministic, so identical requests render identically (and hit the cache), yet a CoT
    cannot carry its own token: that would require containing a hash of itself. Should the token
    occur anyway (in the CoT or in any ``avoid`` text, case-insensitively; ``folded`` texts are
    already lower-case), a counter is mixed in until it does not.
    """
    data = _FENCE_SALT + cot.encode("utf-8", "surrogatepass")
    haystacks = [cot.lower(), *(text.lower() for text in avoid), *folded]
    counter = 0
    while True:
        material = data if counter == 0 else data + b"\0" + str(counter).encode()
        token = "COT-" + hashlib.sha256(material).hexdigest()[:16]
        if not any(token.lower() in text for text in haystacks):
            return token
        counter += 1


def fence_cot(cot: str, token: str) -> str:
    """The CoT between its BEGIN and END boundary lines; the CoT itself is left untouched."""
    return f"{FENCE_BEGIN.format(token=token)}\n{cot}\n{FENCE_END.format(token=token)}"


# ---------------------------------------------------------------------------- input rendering


def _json(value: Any, *, pretty: bool = False, sort_keys: bool = False) -> str:
    option = (orjson.OPT_INDENT_2 if pretty else 0) | (orjson.OPT_SORT_KEYS if sort_keys else 0)
    text = orjson.dumps(value, option=option).decode()
    for raw, escaped in _RAW_BREAKS.items():
        text = text.replace(raw, escaped)
    return text


def _as_document(name: str, value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise UserInputError(f"input {name!r} is not valid JSON: {exc}", field=name) from None
    return value


def _render_value(name: str, value: Any) -> str:
    try:
        if name in _SCALAR:
            if value is not None and not isinstance(value, str | int | float | bool):
                raise UserInputError(f"input {name!r} must be a string", field=name)
            return _json(value)
        if name in _PRETTY_DOC:
            return _json(_as_document(name, value), pretty=True)
        if name in _COMPACT_DOC:
            document = {} if value is None else _as_document(name, value)
            if isinstance(document, Mapping) and any(
                isinstance(v, float) and not math.isfinite(v) for v in document.values()
            ):
                raise ValueError("NaN and infinity are not JSON")
            return _json(document, sort_keys=True)
    except (TypeError, ValueError) as exc:  # not JSON-serialisable
        raise UserInputError(
            f"input {name!r} cannot be rendered as JSON: {exc}", field=name
        ) from None
    raise UserInputError(f"unknown input {name!r}", field=name)


# ---------------------------------------------------------------------------- loading


def available_prompt_sets() -> tuple[str, ...]:
    """Names of the bundled prompt sets (folders under the prompts asset directory)."""
    root = asset_dir("prompts")
    return tuple(sorted(p.parent.name for p in root.glob("*/manifest.json")))


def _resolve_folder(name_or_path: str | Path) -> Path:
    text = str(name_or_path)
    looks_like_path = isinstance(name_or_path, Path) or "/" in text or "\\" in text
    if not looks_like_path:
        if not _NAME.fullmatch(text):
            raise ConfigError(f"invalid prompt-set name {text!r}")
        folder = asset_dir("prompts") / text
        if not (folder / "manifest.json").is_file():
            raise ConfigError(
                f"unknown prompt set {text!r}; available: {', '.join(available_prompt_sets())}"
            )
        return folder
    path = Path(name_or_path)
    folder = path.parent if path.name == "manifest.json" else path
    if not (folder / "manifest.json").is_file():
        raise ConfigError(f"no manifest.json in prompt-set folder {folder}")
    return folder


def _read_template(folder: Path, manifest: Path, metric: str, role: str, rel: Any) -> bytes:
    where = f"{manifest}: metrics.{metric}.{role}"
    if not isinstance(rel, str) or not rel:
        raise ConfigError(f"{where} must name a template file")
    path = (folder / rel).resolve()
    if not path.is_relative_to(folder.resolve()):
        raise ConfigError(f"{where} points outside the prompt-set folder: {rel!r}")
    if not path.is_file():
        raise ConfigError(f"{where}: template file not found: {path}")
    return path.read_bytes()


def _check_template(path: Path, text: str, metric: Metric, role: str) -> Template:
    template = Template(text)
    known = _known(metric)
    block_uses = 0
    for match in template.pattern.finditer(text):
        if match.group("invalid") is not None:
            line = text.count("\n", 0, match.start("invalid")) + 1
            raise ConfigError(
                f"{path}: invalid placeholder at line {line} (write $$ for a literal dollar)"
            )
        name = match.group("named") or match.group("braced")
        if name is None:
            continue
        if name not in known:
            raise ConfigError(
                f"{path}: unknown placeholder ${name} for metric {metric}; "
                f"known: {', '.join('$' + n for n in sorted(known))}"
            )
        block_uses += name == "cot_block"
    expected = 1 if role == "user" else 0
    if block_uses != expected:
        raise ConfigError(
            f"{path}: the {role} template must contain $cot_block exactly {expected} time(s), "
            f"found {block_uses}"
        )
    return template


def load_prompt_set(name_or_path: str | Path = "v2") -> PromptSet:
    """Load and validate a prompt set by name (bundled) or by folder / manifest path.

    Raises ConfigError naming the file at fault: a missing or malformed manifest, a missing
    metric, a template that cannot be read, an invalid or unknown placeholder.
    """
    folder = _resolve_folder(name_or_path)
    manifest_path = folder / "manifest.json"
    manifest_bytes = manifest_path.read_bytes()
    try:
        manifest = json.loads(manifest_bytes)
    except ValueError as exc:
        raise ConfigError(f"{manifest_path}: not valid JSON: {exc}") from None
    if not isinstance(manifest, dict):
        raise ConfigError(f"{manifest_path}: must be a JSON object")
    set_id, description = manifest.get("id"), manifest.get("description", "")
    if not isinstance(set_id, str) or not set_id:
        raise ConfigError(f"{manifest_path}: 'id' must be a non-empty string")
    if not isinstance(description, str):
        raise ConfigError(f"{manifest_path}: 'description' must be a string")
    metrics = manifest.get("metrics")
    if not isinstance(metrics, dict):
        raise ConfigError(f"{manifest_path}: 'metrics' must be an object")
    catalogue = metric_names()
    unknown = sorted(set(metrics) - set(catalogue))
    missing = [m for m in catalogue if m not in metrics]
    if unknown or missing:
        raise ConfigError(
            f"{manifest_path}: metrics must be exactly {list(catalogue)}; "
            f"missing {missing}, unknown {unknown}"
        )

    files: dict[str, bytes] = {"manifest.json": manifest_bytes}
    templates: dict[Metric, _MetricTemplates] = {}
    for metric in catalogue:
        entry = metrics[metric]
        if not isinstance(entry, dict) or set(entry) != {"system", "user"}:
            raise ConfigError(
                f"{manifest_path}: metrics.{metric} must have exactly 'system' and 'user'"
            )
        parsed: dict[str, Template] = {}
        for role in ("system", "user"):
            raw = _read_template(folder, manifest_path, metric, role, entry[role])
            path = folder / entry[role]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ConfigError(f"{path}: not UTF-8: {exc}") from None
            parsed[role] = _check_template(path, text, metric, role)
            files[Path(entry[role]).as_posix()] = raw
        used = {name for t in parsed.values() for name in t.get_identifiers()}
        templates[metric] = _MetricTemplates(
            system=parsed["system"],
            user=parsed["user"],
            required=frozenset(used - _DERIVED) | {"cot"},
            folded_text=(parsed["system"].template + "\n" + parsed["user"].template).lower(),
        )

    return PromptSet(
        id=set_id,
        sha256=_digest(files),
        description=description,
        path=folder,
        templates=MappingProxyType(templates),
    )


def _digest(files: Mapping[str, bytes]) -> str:
    # Same framing as assets.sha256_tree, restricted to the files the set actually uses.
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode())
        digest.update(b"\0")
        digest.update(files[name])
        digest.update(b"\0")
    return digest.hexdigest()


# ---------------------------------------------------------------------------- inference prompt


@dataclass(frozen=True, slots=True)
class InferencePrompt:
    """The VLM inference prompt of one version; ``render`` inserts the question verbatim."""

    id: str
    sha256: str
    template: Template = field(repr=False, compare=False)

    def render(self, question: str) -> str:
        """The full prompt text for ``question`` (its option list included)."""
        if not isinstance(question, str) or not question.strip():
            raise UserInputError("the question must be a non-empty string", field="question")
        return self.template.substitute(question=question)


@cache
def load_inference_prompt(version: str = "v1") -> InferencePrompt:
    """Load ``prompts/inference/<version>.md``; its only placeholder is ``$question``."""
    if not _NAME.fullmatch(version):
        raise ConfigError(f"invalid inference-prompt version {version!r}")
    path = asset_dir("prompts") / "inference" / f"{version}.md"
    if not path.is_file():
        raise ConfigError(f"inference prompt not found: {path}")
    raw = path.read_bytes()
    template = Template(raw.decode("utf-8"))
    names = set(template.get_identifiers()) if template.is_valid() else None
    if names != {"question"}:
        raise ConfigError(f"{path}: must use exactly the placeholder $question, found {names}")
    return InferencePrompt(
        id=f"inference-{version}", sha256=hashlib.sha256(raw).hexdigest(), template=template
    )


def render_inference_prompt(question: str, *, version: str = "v1") -> str:
    """The VLM inference prompt for ``question`` (used by the CoT-generation sidecar)."""
    return load_inference_prompt(version).render(question)
