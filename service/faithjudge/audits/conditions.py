"""Which catalogue conditions each audit reads, and how an item joins an audit.

An item (one model's answers to one case) joins an audit when it holds at least one of that
audit's *marker* conditions: a swap or a mask for Lotfinia, a blank/shuffled/hard-negative/
corrupted image for Zafar, a MedVIGIL probe kind for MedVIGIL. ``baseline`` (the original)
and ``no_image`` belong to every audit, so they do not decide membership. Records of other
catalogue conditions (Moll's hints and overlays, say) are valid but used by no audit; the
report counts them.

Pure module: constants and small pure functions.
"""

from __future__ import annotations

__all__ = [
    "FRAMEWORKS",
    "LOTFINIA_CONDITIONS",
    "LOTFINIA_MARKERS",
    "MEDVIGIL_CONDITIONS",
    "MEDVIGIL_FAMILIES",
    "MEDVIGIL_MARKERS",
    "MULTI_PROBE_CONDITIONS",
    "ORIGINAL",
    "REFUSAL_LETTER",
    "REFUSAL_PROBES",
    "ZAFAR_CONDITIONS",
    "ZAFAR_MARKERS",
    "markers_of",
]

ORIGINAL = "baseline"
NO_IMAGE = "no_image"

LOTFINIA_MARKERS = frozenset({"swap_same_label", "target_mask", "irrelevant_mask"})
LOTFINIA_CONDITIONS = LOTFINIA_MARKERS | {ORIGINAL}

ZAFAR_MARKERS = frozenset({"blank", "shuffle", "hard_negative", "corrupt"})
ZAFAR_CONDITIONS = ZAFAR_MARKERS | {ORIGINAL, NO_IMAGE}

# MedVIGIL families scored into the headline metrics, with their report names.
MEDVIGIL_FAMILIES: dict[str, str] = {
    ORIGINAL: "Orig",
    "paraphrase": "PR",
    "negation": "NEG",
    "specificity_drop": "SDR",
    "knowledge_only": "LPA",
    "false_premise_trap": "Trap",
    "roi_only": "ROI-only",
    "roi_masked": "ROI-masked",
    "lr_flip": "LR-flip",
}
MEDVIGIL_MARKERS = frozenset(
    (set(MEDVIGIL_FAMILIES) - {ORIGINAL})
    | {"visual_counterfactual", "roi_progressive_mask", "blur_sigma"}
)
MEDVIGIL_CONDITIONS = MEDVIGIL_MARKERS | {ORIGINAL, NO_IMAGE}

# Probes whose correct answer is the safe-action letter (MedVIGIL §4.2).
REFUSAL_PROBES = frozenset({"false_premise_trap", "roi_masked"})
REFUSAL_LETTER = "e"  # normalised (case-folded) form of "E"

# Conditions that may hold several probes per item, told apart by ``variant``.
MULTI_PROBE_CONDITIONS = frozenset({"false_premise_trap", "blur_sigma", "roi_progressive_mask"})

FRAMEWORKS: tuple[str, ...] = ("lotfinia", "zafar", "medvigil")


def markers_of(framework: str) -> frozenset[str]:
    """The conditions whose presence puts an item into ``framework``'s audit."""
    return {
        "lotfinia": LOTFINIA_MARKERS,
        "zafar": ZAFAR_MARKERS,
        "medvigil": MEDVIGIL_MARKERS,
    }[framework]
