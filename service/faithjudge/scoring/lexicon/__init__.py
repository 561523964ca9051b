"""Pure rules of the offline ``lexicon`` judge: KB concept matching, cue and tone lexicons.

Each metric function takes the compiled lexicon (``compile_lexicon`` of the JSON files in
``knowledge_base/lexicons/``, loaded by the judge), the CoT and the structured inputs the
pipeline rendered the prompt from, and returns the reply an LLM judge would emit
(schemas/*.schema.json). Quotes are always exact slices of the original CoT (whole sentences),
so the evidence check passes. Modules: ``text`` (sentences, stems, phrase lists), ``negation``,
``compiled`` (the Lexicon), ``fidelity`` (CF), ``attribution`` (CA), ``tone`` (CT),
``replies`` (the fields every reply shares). Pure: no I/O; deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from faithjudge_client.registry import Registry, UnknownName

from faithjudge.scoring.lexicon.attribution import causal_attribution, channel_of, influence_blocks
from faithjudge.scoring.lexicon.compiled import Lexicon, compile_lexicon
from faithjudge.scoring.lexicon.fidelity import (
    clinical_fidelity,
    concept_credits,
    finding_statements,
)
from faithjudge.scoring.lexicon.negation import is_hypothetical, is_negated
from faithjudge.scoring.lexicon.text import (
    PhraseIndex,
    Sentence,
    clear_memos,
    is_placeholder,
    sentences,
    stem,
    tokenize,
)
from faithjudge.scoring.lexicon.tone import confidence_tone

__all__ = [
    "RULES",
    "RULES_VERSION",
    "Lexicon",
    "PhraseIndex",
    "Rule",
    "Sentence",
    "causal_attribution",
    "channel_of",
    "clear_memos",
    "clinical_fidelity",
    "compile_lexicon",
    "concept_credits",
    "confidence_tone",
    "finding_statements",
    "influence_blocks",
    "is_hypothetical",
    "is_negated",
    "is_placeholder",
    "judge_metric",
    "register_rule",
    "sentences",
    "stem",
    "tokenize",
    "unregister_rule",
]

RULES_VERSION = "lexicon_rules/5"

Rule = Callable[[Lexicon, str, Mapping[str, Any]], dict[str, Any]]


def _installed_rule(_metric: str, found: object) -> Rule:
    if not callable(found):
        raise TypeError(f"names a {type(found).__name__}, not a rule function")
    return cast(Rule, found)


# The offline rule of every catalogue metric, by metric name. A shipped rule that lives in a
# module of its own is registered by reference ("faithjudge.scoring.lexicon.MODULE:FUNCTION"),
# imported the first time the lexicon judge grades that metric; an installed package's rule is
# an entry point of the "faithjudge.lexicon_rules" group, imported the same way.
RULES: Registry[Rule] = Registry(
    "lexicon rule", group="faithjudge.lexicon_rules", adapt=_installed_rule
)
RULES.register("clinical_fidelity", clinical_fidelity)
RULES.register("causal_attribution", causal_attribution)
RULES.register("confidence_tone", confidence_tone)


def register_rule(metric: str, rule: Rule | str, *, replace: bool = False) -> None:
    """Give the offline judge a rule for ``metric`` (a metric registered in the catalogue):
    the function, or a lazy ``"module:function"`` reference.

    Raises:
        ValueError: ``metric`` already has another rule and ``replace`` is False.
    """
    RULES.register(metric, rule, replace=replace)


def unregister_rule(metric: str) -> None:
    RULES.unregister(metric)


def judge_metric(lex: Lexicon, metric: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The reply of ``metric`` (the JSON object an LLM judge would send) for the structured
    pipeline ``inputs`` (cot and friends)."""
    try:
        rule = RULES.get(metric)
    except UnknownName:
        raise ValueError(
            f"the lexicon judge has no rule for metric {metric!r}; known: "
            f"{', '.join(RULES.names())}"
        ) from None
    cot = inputs.get("cot")
    return rule(lex, cot if isinstance(cot, str) else "", inputs)
