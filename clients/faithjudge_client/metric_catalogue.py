"""The metric catalogue: every metric declared once, with everything the service needs of it.

Contracts, schemas, prompts, the pipeline, the verdict, the reports, the gate and the judge
validation iterate over this catalogue instead of naming metrics. A shipped metric is one
line in ``_BUILT_IN``; a plugin's is one ``register_metric`` call, or one entry point of its
installed package in the ``faithjudge.metrics`` group. Either way it brings its
assets (the output schema, one system and one user template in every prompt set) and, for the
offline judge, a lexicon rule registered under its name (docs/ARCHITECTURE.md, "A new
metric", lists every step and the test that follows them).

Besides the graded metrics there is one derived score, confidence calibration (CC, METHODS
§1.7): it combines the metric whose ``calibration_role`` is ``fidelity`` with the one whose role
is ``tone``, and exists for an item only when both were graded.

Scope orders are part of every rendered output, so they are derived here once:

- ``report_scopes``: every metric, then CC (the run report's coverage tables);
- ``headline_scopes``: the gated metrics, then CC (aggregates, macro coverage, the gates);
- ``agreement_scopes``: the gated metrics, CC, then the others (judge validation).

Pure and a leaf: no I/O, and it imports nothing of FaithJudge (the registry mechanism is
``faithjudge_client.registry``), so the contracts and the scoring core can both read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from faithjudge_client.registry import Registry

__all__ = [
    "BUILT_IN_METRICS",
    "CATALOGUE",
    "CC_LABEL",
    "CalibrationRole",
    "MetricSpec",
    "agreement_scopes",
    "calibration_pair",
    "gated_labels",
    "headline_scopes",
    "higher_is_better",
    "is_metric",
    "label_of",
    "labels",
    "metric_names",
    "metric_of_label",
    "metric_spec",
    "metrics",
    "register_metric",
    "report_scopes",
    "sham_metric",
    "unregister_metric",
]

CC_LABEL = "CC"
"""Short label of the derived confidence-calibration score."""

CalibrationRole = Literal["fidelity", "tone"]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric: how it is asked, checked, reported, gated and validated."""

    name: str
    """Wire name: request ``metrics`` entry, result key, prompt-manifest key, schema name."""
    label: str
    """Short label used in tables, coverage scopes and item-table columns (``CF``)."""
    title: str
    """Human title (``clinical fidelity``)."""
    schema_file: str
    """File name of the judge-output JSON Schema, in the schema asset folder."""
    prompt_inputs: tuple[str, ...] = ()
    """Inputs the prompt templates may use besides the CoT, in the order they are built."""
    signals: tuple[str, ...] = ()
    """Metric-specific output fields a valid grade carries in ``signals``."""
    needs_kb: bool = False
    """Graded against the knowledge-base criteria of the ground truth (KB caps apply)."""
    quotes_above: int = 1
    """A score above this needs at least one verbatim quote."""
    higher_is_better: bool = True
    calibration_role: CalibrationRole | None = None
    """Its part in confidence calibration (CC), if any."""
    gated: bool = True
    """Aggregated in reports, part of the macro coverage and of the eligibility gates (of
    ``faithjudge gate`` and of ``validate-judge``), and, with a ``rating_key``, of the macro tau.
    Not gated (confidence tone): reported beside the others, in the gates only through CC."""
    sham_fpr: bool = False
    """Its scores on placebo (sham) items give the gated false-positive rate (score > 3)."""
    rating_key: str | None = None
    """Column of the radiologist ratings that grade the same axis: ``validate-judge`` compares
    the judge's scores with their consensus (tau-b) and, for a gated metric, averages that tau
    into the macro tau. None: no radiologist rates it, so it is not validated against them; a
    gated metric without one still counts in the judge's coverage, macro coverage and gates,
    and ``validate-judge`` reports it as having no radiologist rating."""
    schema_dir: Path | None = None
    """Folder of ``schema_file`` when it is not the bundled schema folder."""

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or not self.name.islower():
            raise ValueError(f"metric name {self.name!r} must be a lower-case identifier")
        if not self.label or not self.label.isalnum() or self.label == CC_LABEL:
            raise ValueError(f"metric label {self.label!r} must be alphanumeric and not CC")
        if "cot" in self.prompt_inputs:
            raise ValueError("prompt_inputs lists the inputs besides the CoT; drop 'cot'")


_BUILT_IN: tuple[MetricSpec, ...] = (
    MetricSpec(
        name="clinical_fidelity",
        label="CF",
        title="clinical fidelity",
        schema_file="clinical_fidelity.schema.json",
        prompt_inputs=("question", "ground_truth", "kb_entry", "context_flags"),
        signals=("basis", "has_omission", "has_hallucination"),
        needs_kb=True,
        calibration_role="fidelity",
        rating_key="clinical_fidelity",
    ),
    MetricSpec(
        name="causal_attribution",
        label="CA",
        title="causal attribution",
        schema_file="causal_attribution.schema.json",
        prompt_inputs=("question", "modification_description", "final_answer"),
        signals=("did_acknowledge", "claimed_influence"),
        sham_fpr=True,
        rating_key="causal_attribution",
    ),
    MetricSpec(
        name="confidence_tone",
        label="CT",
        title="confidence tone",
        schema_file="confidence_tone.schema.json",
        signals=("is_confident", "confidence_level"),
        calibration_role="tone",
        # raw tone is no faithfulness measure: it enters reports and gates only through CC
        gated=False,
        rating_key="confidence_tone",
    ),
)
BUILT_IN_METRICS: tuple[str, ...] = tuple(spec.name for spec in _BUILT_IN)


def _fits(spec: MetricSpec, others: tuple[MetricSpec, ...]) -> None:
    """Raise ``ValueError`` when ``spec`` takes what another metric holds."""
    others = tuple(other for other in others if other.name != spec.name)
    if any(other.label == spec.label for other in others):
        raise ValueError(f"metric label {spec.label!r} is already taken")
    if spec.sham_fpr and any(other.sham_fpr for other in others):
        raise ValueError("the placebo false-positive rate is already taken by another metric")
    if spec.calibration_role is not None and any(
        other.calibration_role == spec.calibration_role for other in others
    ):
        raise ValueError(f"the calibration role {spec.calibration_role!r} is already taken")


def _installed_metric(name: str, found: object) -> MetricSpec:
    """The metric an installed package declares in the ``faithjudge.metrics`` entry-point group:
    a ``MetricSpec`` of the entry point's name, checked against the metrics loaded before it."""
    if not isinstance(found, MetricSpec):
        raise TypeError(f"names a {type(found).__name__}, not a MetricSpec")
    if found.name != name:
        raise ValueError(f"names the metric {found.name!r}, not {name!r}")
    _fits(found, CATALOGUE.loaded_values())
    return found


CATALOGUE: Registry[MetricSpec] = Registry(
    "metric", group="faithjudge.metrics", adapt=_installed_metric
)
"""Every metric by name, in catalogue order (read it through the functions below): the built-in
ones, those registered at run time, then those of installed packages (``faithjudge.metrics``
entry points, each naming a ``MetricSpec``)."""
for _spec in _BUILT_IN:
    CATALOGUE.register(_spec.name, _spec)
del _spec


def register_metric(spec: MetricSpec, *, replace: bool = False) -> MetricSpec:
    """Add ``spec`` to the catalogue (after the metrics already there).

    Registering the same spec again changes nothing; another spec under a taken name needs
    ``replace=True`` (never for a built-in metric).

    Raises:
        ValueError: a clash of name, label, placebo FPR or calibration role.
    """
    if replace and spec.name in BUILT_IN_METRICS:
        raise ValueError(f"metric {spec.name!r} is built in and cannot be replaced")
    if spec.name in CATALOGUE and not replace and CATALOGUE.get(spec.name) == spec:
        return spec
    _fits(spec, _specs())
    CATALOGUE.register(spec.name, spec, replace=replace)
    return spec


def unregister_metric(name: str) -> None:
    """Remove a registered metric; the built-in ones stay."""
    if name in BUILT_IN_METRICS:
        raise ValueError(f"metric {name!r} is built in")
    CATALOGUE.unregister(name)


def _specs() -> tuple[MetricSpec, ...]:
    return CATALOGUE.values()


def is_metric(name: str) -> bool:
    return name in CATALOGUE


def metrics() -> tuple[MetricSpec, ...]:
    return _specs()


def metric_names() -> tuple[str, ...]:
    return CATALOGUE.names()


def labels() -> tuple[str, ...]:
    return tuple(spec.label for spec in _specs())


def metric_spec(name: str) -> MetricSpec:
    return CATALOGUE.get(name)


def label_of(name: str) -> str:
    return metric_spec(name).label


def metric_of_label(label: str) -> str:
    for spec in _specs():
        if spec.label == label:
            return spec.name
    raise ValueError(f"unknown metric label {label!r}; expected one of {list(labels())}")


def calibration_pair() -> tuple[MetricSpec, MetricSpec]:
    """The (fidelity, tone) metrics that confidence calibration combines."""
    roles = {spec.calibration_role: spec for spec in _specs() if spec.calibration_role}
    return roles["fidelity"], roles["tone"]


def sham_metric() -> MetricSpec:
    """The metric whose placebo false-positive rate is gated."""
    return next(spec for spec in _specs() if spec.sham_fpr)


def gated_labels() -> tuple[str, ...]:
    return tuple(spec.label for spec in _specs() if spec.gated)


def report_scopes() -> tuple[str, ...]:
    return (*labels(), CC_LABEL)


def headline_scopes() -> tuple[str, ...]:
    return (*gated_labels(), CC_LABEL)


def higher_is_better(scope: str) -> bool:
    """Direction of a metric label or of CC (a calibrated CoT is the better one)."""
    if scope == CC_LABEL:
        return True
    return metric_spec(metric_of_label(scope)).higher_is_better


def agreement_scopes() -> tuple[str, ...]:
    others = tuple(spec.label for spec in _specs() if not spec.gated)
    return (*gated_labels(), CC_LABEL, *others)
