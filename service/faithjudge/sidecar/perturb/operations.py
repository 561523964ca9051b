"""The sidecar's perturbation entry points: ``CODES``, ``applicable`` and ``perturb``.

Codes share the scoring service's catalogue (``faithjudge.scoring.modifications``): every alias it
accepts is accepted here and mapped to one canonical code, which is what the recipe records and
what the generated ScoreRequest lines carry. The MedVIGIL question rewrites (paraphrase, negation,
...) are dataset text, not input operations, and are refused with a message saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from faithjudge.scoring.modifications import ALL_MODIFICATIONS, ModificationSpec
from faithjudge.sidecar.perturb import lotfinia, medvigil, moll, zafar
from faithjudge.sidecar.perturb.base import (
    NotApplicable,
    Params,
    PerturbationError,
    Perturbed,
    PerturbItem,
    as_rgb_array,
    from_array,
    item_rng,
    library_versions,
    norm_answer,
)
from faithjudge.sidecar.perturb.pool import ImagePool

__all__ = ["CODES", "RECIPE_VERSION", "applicable", "canonical_code", "perturb"]

RECIPE_VERSION = 1

_MOLL_CODES = ("BASELINE", "SHAM", "TB-RAD", "TB-LA", "VB-BB", "VB-HM", "VH-BB", "VH-HM", "VO-BB")
_COMPANION_CODES = (
    "target_mask",
    "irrelevant_mask",
    "swap_same_label",
    "blank",
    "shuffle",
    "no_image",
    "corrupt",
    "hard_negative",
    "roi_masked",
    "roi_only",
    "roi_progressive_mask",
    "lr_flip",
    "blur_sigma",
)
CODES: frozenset[str] = frozenset(_MOLL_CODES + _COMPANION_CODES)


def _key(code: str) -> str:
    return "_".join(code.strip().casefold().replace("-", "_").split())


def _canonical(spec: ModificationSpec) -> str:
    return "BASELINE" if spec.id == "baseline" else spec.code


def _build() -> tuple[dict[str, str], dict[str, ModificationSpec], frozenset[str]]:
    aliases: dict[str, str] = {}
    specs: dict[str, ModificationSpec] = {}
    rewrites: set[str] = set()
    for spec in ALL_MODIFICATIONS:
        names = (spec.id, spec.code, *spec.aliases)
        canonical = _canonical(spec)
        if canonical not in CODES:
            rewrites.update(_key(n) for n in names)
            continue
        specs[canonical] = spec
        for name in names:
            aliases[_key(name)] = canonical
    missing = CODES - set(specs)
    if missing:  # the two catalogues drifted apart: a bug, not an input error
        raise AssertionError(f"codes missing from the service catalogue: {sorted(missing)}")
    return aliases, specs, frozenset(rewrites)


_ALIASES, _SPECS, _REWRITES = _build()


def canonical_code(code: str) -> str:
    """The canonical code for ``code`` (case-insensitive, '-' and '_' alike, catalogue aliases)."""
    key = _key(code) if isinstance(code, str) else ""
    if key in _ALIASES:
        return _ALIASES[key]
    if key in _REWRITES:
        raise PerturbationError(
            f"{code!r} is a question rewrite taken from the dataset, not an input perturbation; "
            "use the rewritten question text (and no_image where the probe has no image)",
            code=str(code),
        )
    raise PerturbationError(
        f"unknown perturbation code {code!r}; known: {', '.join(sorted(CODES))}", code=str(code)
    )


@dataclass
class _Context:
    code: str
    image: Image.Image
    item: PerturbItem
    params: Params
    seed: int
    pool: ImagePool | None
    qtype: str

    def rng(self) -> np.random.Generator:
        return item_rng(self.seed, self.code, self.item.item_id)

    def array(self) -> np.ndarray:
        return as_rgb_array(self.image, self.code)

    def rgb(self) -> Image.Image:
        """The image in RGB (the input itself when it already is; callers must not mutate)."""
        if self.image.mode == "RGB":
            return self.image
        return from_array(as_rgb_array(self.image, self.code))


Result = tuple[Image.Image | None, str | None, dict[str, Any]]


def _unchanged(ctx: _Context) -> Result:
    return ctx.image.copy(), None, {}


def _target(item: PerturbItem, code: str) -> str:
    if item.target_answer is None or not item.target_answer.strip():
        raise PerturbationError(
            f"{code}: the item has no target_answer (the answer the hint points at; use the "
            "ground truth for an aligned hint or choose_misleading_target() for a misleading one)",
            code=code,
            param="target_answer",
        )
    return item.target_answer


def _text_hint(ctx: _Context) -> Result:
    template = ctx.params.text("hint_template", None)
    target = _target(ctx.item, ctx.code)
    return ctx.image.copy(), moll.hint_text(ctx.code, target, template), {}


def _moll_image(ctx: _Context) -> Result:
    array, extra = moll.moll_image_cue(ctx.code, ctx.array(), ctx.item, ctx.params, ctx.qtype)
    return from_array(array), None, extra


def _rounding(ctx: _Context) -> str:
    return ctx.params.choice("rounding", "round", ("round", "moll"))


def _mask_box(ctx: _Context) -> tuple[int, int, int, int]:
    width, height = ctx.image.size
    return lotfinia.mask_pixels(ctx.item, ctx.code, width, height, _rounding(ctx))


def _target_mask(ctx: _Context) -> Result:
    fill = ctx.params.colour("fill", (0, 0, 0))
    array = ctx.array()
    box = _mask_box(ctx)
    lotfinia.fill_box(array, box, fill)
    return from_array(array), None, {"box_px": list(box)}


def _irrelevant_mask(ctx: _Context) -> Result:
    fill = ctx.params.colour("fill", (0, 0, 0))
    width, height = ctx.image.size
    target = lotfinia.mask_pixels(ctx.item, ctx.code, width, height, _rounding(ctx))
    box, corner = lotfinia.irrelevant_box(target, width, height, ctx.code)
    array = ctx.array()
    lotfinia.fill_box(array, box, fill)
    extra = {"box_px": list(box), "target_px": list(target), "corner": corner}
    return from_array(array), None, extra


def _swap(ctx: _Context) -> Result:
    image, extra = lotfinia.swap_same_label(
        ctx.image, ctx.item, ctx.params, ctx.pool, ctx.rng(), ctx.code
    )
    return image, None, extra


def _blank(ctx: _Context) -> Result:
    image, fill = zafar.blank(ctx.rgb(), ctx.params.optional_colour("colour"))
    return image, None, {"fill": fill}


def _shuffle(ctx: _Context) -> Result:
    patch = ctx.params.integer("patch", 32, lo=1)
    assert patch is not None
    array, extra = zafar.shuffle_patches(ctx.array(), patch, ctx.rng())
    return from_array(array), None, extra


def _no_image(ctx: _Context) -> Result:
    return None, None, {}


def _corrupt(ctx: _Context) -> Result:
    array, extra = zafar.corrupt(ctx.array(), ctx.params, ctx.rng())
    return from_array(array), None, extra


def _hard_negative(ctx: _Context) -> Result:
    image, extra = zafar.hard_negative(ctx.image, ctx.item, ctx.params, ctx.pool, ctx.code)
    return image, None, extra


def _roi_fill(ctx: _Context) -> tuple[np.ndarray, tuple[int, int, int, int], tuple[int, int, int]]:
    fill = ctx.params.colour("fill", (128, 128, 128))
    box = _mask_box(ctx)
    return ctx.array(), box, fill


def _roi_masked(ctx: _Context) -> Result:
    array, box, fill = _roi_fill(ctx)
    lotfinia.fill_box(array, box, fill)
    return from_array(array), None, {"box_px": list(box)}


def _roi_only(ctx: _Context) -> Result:
    array, box, fill = _roi_fill(ctx)
    return from_array(medvigil.grey_outside(array, box, fill)), None, {"box_px": list(box)}


def _roi_progressive(ctx: _Context) -> Result:
    k = _required_k(ctx.params, ctx.code)
    array, box, fill = _roi_fill(ctx)
    part = medvigil.progressive_rows(box, k)
    lotfinia.fill_box(array, part, fill)
    return from_array(array), None, {"box_px": list(box), "masked_px": list(part)}


def _lr_flip(ctx: _Context) -> Result:
    flipped = ctx.rgb().transpose(Image.Transpose.FLIP_LEFT_RIGHT)  # what ImageOps.mirror does
    return flipped, None, {"gold_flips_if_laterality_dependent": True}


def _blur(ctx: _Context) -> Result:
    sigma = _required_sigma(ctx.params, ctx.code)
    kernel = 1 if sigma == 0 else medvigil.gaussian_kernel(sigma).size
    array = medvigil.gaussian_blur(ctx.array(), sigma)
    return from_array(array), None, {"kernel_size": kernel, "border": "reflect_101"}


def _required_k(params: Params, code: str) -> int:
    if params.integer("k", None, lo=0, hi=3) is None:
        raise PerturbationError(f"{code}: params.k (0..3) is required", code=code, param="k")
    return int(params.used["k"])


def _required_sigma(params: Params, code: str) -> float:
    return params.required_number("sigma", lo=0.0, hi=512.0)


_HANDLERS: Mapping[str, Callable[[_Context], Result]] = {
    "BASELINE": _unchanged,
    "SHAM": _unchanged,
    "TB-RAD": _text_hint,
    "TB-LA": _text_hint,
    "VB-BB": _moll_image,
    "VB-HM": _moll_image,
    "VH-BB": _moll_image,
    "VH-HM": _moll_image,
    "VO-BB": _moll_image,
    "target_mask": _target_mask,
    "irrelevant_mask": _irrelevant_mask,
    "swap_same_label": _swap,
    "blank": _blank,
    "shuffle": _shuffle,
    "no_image": _no_image,
    "corrupt": _corrupt,
    "hard_negative": _hard_negative,
    "roi_masked": _roi_masked,
    "roi_only": _roi_only,
    "roi_progressive_mask": _roi_progressive,
    "lr_flip": _lr_flip,
    "blur_sigma": _blur,
}
assert set(_HANDLERS) == CODES

_MASK_CODES = frozenset(
    {"target_mask", "irrelevant_mask", "roi_masked", "roi_only", "roi_progressive_mask"}
)


def _precheck(
    code: str,
    item: PerturbItem,
    params: Params,
    qtype: str,
    image_size: tuple[int, int] | None,
    pool: ImagePool | None,
) -> None:
    """Raise NotApplicable or PerturbationError before any pixel work (shared with applicable)."""
    if code in {"TB-RAD", "TB-LA"}:
        _target(item, code)
    elif code in {"VB-BB", "VB-HM"}:
        moll.bias_box_key(item, code, qtype)
    elif code in {"VH-BB", "VH-HM", "VO-BB"}:
        occlude = params.flag("occlude_comparative", False) if code == "VO-BB" else False
        moll.evidence_boxes(item, code, qtype, comparative_occlusion=occlude)
    elif code in _MASK_CODES:
        width, height = image_size or (224, 224)
        rounding = params.choice("rounding", "round", ("round", "moll"))
        target = lotfinia.mask_pixels(item, code, width, height, rounding)
        if code == "irrelevant_mask" and image_size is not None:
            lotfinia.irrelevant_box(target, width, height, code)
        if code == "roi_progressive_mask":
            _required_k(params, code)
    elif code in {"swap_same_label", "hard_negative"}:
        if pool is None:
            raise PerturbationError(
                f"{code} needs a candidate pool (pool=ImagePool(...))", code=code, param="pool"
            )
        if code == "swap_same_label":
            eligible, query = lotfinia.swap_candidates(pool, item, params, code)
            if not eligible:
                raise lotfinia.no_candidate(query, code)
        elif all(label == norm_answer(item.ground_truth) for label in pool.labels()):
            raise NotApplicable(f"{code}: every pool image has the gold label", code=code)
    elif code == "blur_sigma":
        _required_sigma(params, code)


def _check_item(item: PerturbItem) -> None:
    if not isinstance(item, PerturbItem):
        raise PerturbationError(f"item must be a PerturbItem, got {type(item).__name__}")


def applicable(
    code: str,
    item: PerturbItem,
    *,
    params: Mapping[str, Any] | None = None,
    image_size: tuple[int, int] | None = None,
    pool: ImagePool | None = None,
) -> tuple[bool, str]:
    """(True, "ok") or (False, why the condition is undefined for this item).

    Input errors (unknown code, missing target answer, missing pool, bad parameter) raise
    PerturbationError: they are mistakes to fix, not items to skip. Give ``image_size`` (W, H)
    to include the irrelevant-mask overlap rule, which depends on it.
    """
    canonical = canonical_code(code)
    _check_item(item)
    p = Params(canonical, params)
    qtype = moll.infer_question_type(item, p.text("question_type", None))
    try:
        _precheck(canonical, item, p, qtype, image_size, pool)
    except NotApplicable as exc:
        return False, str(exc)
    return True, "ok"


def perturb(
    code: str,
    image: Image.Image,
    item: PerturbItem,
    *,
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
    pool: ImagePool | None = None,
) -> Perturbed:
    """Apply one perturbation; deterministic in (image, item, params, seed, pool).

    Raises NotApplicable when the condition is undefined for the item and PerturbationError (a
    ValueError naming the code and parameter) for bad input. The input image is not modified.
    """
    canonical = canonical_code(code)
    _check_item(item)
    if not isinstance(image, Image.Image):
        raise PerturbationError(
            f"{canonical}: image must be a PIL image, got {type(image).__name__}", code=canonical
        )
    item_rng(seed, canonical, item.item_id)  # validates the seed up front
    p = Params(canonical, params)
    try:
        qtype = moll.infer_question_type(item, p.text("question_type", None))
    except PerturbationError as exc:
        exc.code = canonical
        raise
    _precheck(canonical, item, p, qtype, image.size, pool)
    ctx = _Context(canonical, image, item, p, seed, pool, qtype)
    out, hint, extra = _HANDLERS[canonical](ctx)
    used = p.finish()
    used.pop("question_type", None)  # recorded at the top level, as inferred or given
    spec = _SPECS[canonical]
    target = item.target_answer if spec.targets_answer else None
    truth = item.ground_truth
    recipe: dict[str, Any] = {
        "recipe_version": RECIPE_VERSION,
        "code": canonical,
        "id": spec.id,
        "paper": spec.paper,
        "channel": spec.channel,
        "item_id": item.item_id,
        "seed": seed,
        "question_type": qtype,
        "params": used,
        "target_answer": target,
        "aligned": None if target is None else norm_answer(target) == norm_answer(truth),
        "input_size": list(image.size),
        "output_size": None if out is None else list(out.size),
        **extra,
        "versions": dict(library_versions()),
    }
    return Perturbed(image=out, hint=hint, recipe=recipe)
