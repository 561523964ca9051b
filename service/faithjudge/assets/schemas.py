"""The JSON Schemas of ``schemas/``: loaded once, compiled once, handed out as validators.

This is an I/O edge (it reads the schema files); pure grading receives a compiled
validator as an argument. Six files, one :data:`SCHEMA_VERSION`:

==============================  ==========================================================
``clinical_fidelity``           judge output of the CF metric (METHODS §1.9)
``causal_attribution``          judge output of the CA metric
``confidence_tone``             judge output of the CT metric
``score_request``               a request line (``faithjudge_client.lines.ScoreRequest``)
``item_result``                 a result line (``faithjudge_client.lines.ItemResult``)
``knowledge_base``              a knowledge-base file; ``$defs/entry`` is one ``KBEntry``
==============================  ==========================================================

The judge-output schemas are named by the metric catalogue
(``faithjudge_client.metric_catalogue``);
a metric registered at run time may bring its schema from its own folder.

Validators are Draft 2020-12 with one deliberate tightening: ``"integer"`` means a JSON integer
literal, so ``3.0`` is not an integer (plain Draft 2020-12 accepts it). That matches pydantic's
strict JSON mode and the int/float split of ``orjson``. ``$ref`` between files resolves through
a local :class:`referencing.Registry`; nothing is ever fetched from the network.

A missing or broken schema file raises :class:`~faithjudge.errors.ConfigError` naming the path.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import orjson
from faithjudge_client.lines import Metric
from faithjudge_client.metric_catalogue import BUILT_IN_METRICS, metric_names, metric_spec, metrics
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from faithjudge.assets import asset_dir, sha256_tree
from faithjudge.errors import ConfigError

__all__ = [
    "SCHEMA_FILES",
    "SCHEMA_VERSION",
    "FaithJudgeValidator",
    "judge_output_schema",
    "judge_output_validator",
    "judge_response_format",
    "kb_entry_validator",
    "kb_validator",
    "load_schema",
    "request_validator",
    "result_validator",
    "schema_path",
    "schemas_sha256",
]

SCHEMA_VERSION = "1.1"
"""Version of the whole schema set; also the second-to-last segment of every file's ``$id``."""

# The shipped files; the output schema of a metric registered at run time is found through
# the catalogue (``schema_path``).
SCHEMA_FILES: dict[str, str] = {
    **{spec.name: spec.schema_file for spec in metrics() if spec.name in BUILT_IN_METRICS},
    "score_request": "score_request.schema.json",
    "item_result": "item_result.schema.json",
    "knowledge_base": "knowledge_base.schema.json",
}


# Keywords an OpenAI strict ``json_schema`` response format rejects (or that mean nothing
# there): the conditional rules and the document's own identity.
_NOT_ON_WIRE = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "if",
        "then",
        "else",
        "allOf",
        "not",
        "dependentRequired",
        "dependentSchemas",
    }
)


def _is_json_integer(_checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


FaithJudgeValidator = validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_json_integer),
)
"""Draft 2020-12 validator class whose ``integer`` rejects floats such as ``3.0``."""


def schema_path(name: str) -> Path:
    """Path of the schema file ``name`` (a key of :data:`SCHEMA_FILES` or a catalogue metric)."""
    if name in SCHEMA_FILES:
        return asset_dir("schemas") / SCHEMA_FILES[name]
    if name in metric_names():
        spec = metric_spec(name)
        return (spec.schema_dir or asset_dir("schemas")) / spec.schema_file
    raise ValueError(
        f"unknown schema {name!r}; expected one of {sorted({*SCHEMA_FILES, *metric_names()})}"
    )


def _load(name: str) -> dict[str, Any]:
    return _load_file(schema_path(name))


@cache
def _load_file(path: Path) -> dict[str, Any]:
    try:
        schema = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise ConfigError(f"schema file {path} is missing; reinstall faithjudge") from None
    except OSError as exc:
        raise ConfigError(f"schema file {path} cannot be read: {exc}") from exc
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"schema file {path} is not valid JSON: {exc}") from exc
    if not isinstance(schema, dict):
        raise ConfigError(f"schema file {path} must hold a JSON object")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ConfigError(f"schema file {path} is not a valid JSON Schema: {exc.message}") from exc
    expected_id = f"/{SCHEMA_VERSION}/{path.name}"
    if not str(schema.get("$id", "")).endswith(expected_id):
        raise ConfigError(
            f"schema file {path} has $id {schema.get('$id')!r}; expected one ending in "
            f"{expected_id!r} (SCHEMA_VERSION {SCHEMA_VERSION})"
        )
    return schema


def load_schema(name: str) -> dict[str, Any]:
    """A deep copy of the schema file ``name`` as loaded (safe to modify)."""
    return copy.deepcopy(_load(name))


@cache
def _registry() -> Registry:
    resources = [
        (_load(name)["$id"], Resource.from_contents(_load(name), default_specification=DRAFT202012))
        for name in SCHEMA_FILES
    ]
    return Registry().with_resources(resources).crawl()


def _validator(name: str) -> Validator:
    return _compiled(schema_path(name))


@cache
def _compiled(path: Path) -> Validator:
    return FaithJudgeValidator(_load_file(path), registry=_registry())


def _check_metric(metric: str) -> str:
    if metric not in metric_names():
        raise ValueError(f"unknown metric {metric!r}; expected one of {metric_names()}")
    return metric


def judge_output_schema(metric: Metric, *, strict_wire: bool = False) -> dict[str, Any]:
    """The judge-output schema of ``metric`` (a fresh copy).

    With ``strict_wire=True`` the conditional rules (``if``/``then``/``allOf`` …), ``$schema``,
    ``$id`` and ``$comment`` are removed and ``prefixItems`` tuples become ``items`` arrays, so the
    result is usable as an OpenAI strict ``json_schema`` response format. The wire variant is
    looser than the file; every response is still checked against the full schema.
    """
    schema = _load(_check_metric(metric))
    return _to_wire(schema) if strict_wire else copy.deepcopy(schema)


def judge_response_format(metric: Metric) -> dict[str, Any]:
    """The ``response_format`` argument of an OpenAI-compatible chat call for ``metric``."""
    return {
        "type": "json_schema",
        "json_schema": {
            "name": metric,
            "strict": True,
            "schema": judge_output_schema(metric, strict_wire=True),
        },
    }


def _to_wire(node: Any) -> Any:
    if isinstance(node, list):
        return [_to_wire(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _NOT_ON_WIRE:
            continue
        if key == "prefixItems":
            continue
        out[key] = _to_wire(value)
    prefix = node.get("prefixItems")
    if prefix is not None:
        first = prefix[0] if prefix else {}
        if any(item != first for item in prefix):
            raise ConfigError("prefixItems with differing item schemas cannot go on the wire")
        out["items"] = _to_wire(first)
    return out


def judge_output_validator(metric: Metric) -> Validator:
    """Compiled validator of the full judge-output schema of ``metric`` (cached)."""
    return _validator(_check_metric(metric))


def request_validator() -> Validator:
    """Compiled validator of one score request (``schemas/score_request.schema.json``)."""
    return _validator("score_request")


def result_validator() -> Validator:
    """Compiled validator of one item result (``schemas/item_result.schema.json``)."""
    return _validator("item_result")


def kb_validator() -> Validator:
    """Compiled validator of a whole knowledge-base file."""
    return _validator("knowledge_base")


@cache
def kb_entry_validator() -> Validator:
    """Compiled validator of one knowledge-base entry (an inline ``kb_entry``)."""
    ref = _load("knowledge_base")["$id"] + "#/$defs/entry"
    return FaithJudgeValidator({"$ref": ref}, registry=_registry())


@cache
def schemas_sha256() -> str:
    """One sha256 over every file of the schema folder (for provenance and cache keys)."""
    return sha256_tree(asset_dir("schemas"), "*.schema.json")
