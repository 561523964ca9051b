"""Input perturbations for the sidecar: pure numpy/PIL functions of (image, item, params, seed).

One module per family: ``moll`` (text hints, bias/highlight boxes and heatmaps, occlusion),
``lotfinia`` (target and irrelevant masks, same-label swap), ``zafar`` (blank, shuffle,
corruptions, hard negative), ``medvigil`` (ROI masks, flip, blur ladder); ``geometry`` holds the
box table and pixel rules, ``pool`` the candidate images, ``catalogue`` the entry points.
"""

from faithjudge.sidecar.perturb.base import NotApplicable, PerturbationError, Perturbed, PerturbItem
from faithjudge.sidecar.perturb.geometry import BOXES, region_for_question
from faithjudge.sidecar.perturb.medvigil import BLUR_LADDER
from faithjudge.sidecar.perturb.moll import HINTS, choose_misleading_target, infer_question_type
from faithjudge.sidecar.perturb.operations import CODES, applicable, canonical_code, perturb
from faithjudge.sidecar.perturb.pool import ImagePool, PoolEntry, pixel_digest

__all__ = [
    "BLUR_LADDER",
    "BOXES",
    "CODES",
    "HINTS",
    "ImagePool",
    "NotApplicable",
    "PerturbItem",
    "PerturbationError",
    "Perturbed",
    "PoolEntry",
    "applicable",
    "canonical_code",
    "choose_misleading_target",
    "infer_question_type",
    "perturb",
    "pixel_digest",
    "region_for_question",
]
