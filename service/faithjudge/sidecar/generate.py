"""From items to ScoreRequest lines: the paired baseline/modified design of METHODS §1.1.

For every item the unmodified input (the baseline) and each requested modification are put to
the same VLM with the same prompt. Every run becomes one ScoreRequest line:

* the baseline line has ``modification.code = "baseline"``;
* a modified line carries ``baseline.cot``/``baseline.answer`` from the baseline run (so the
  scorer can decide flips), ``modification.code`` and, for bias cues, ``target_answer``;
* ``metadata.sidecar`` records the run: backend, model and decoding settings, prompt id and
  hash, protocol, the question as shown (hint included), the perturbation recipe, the raw reply
  verbatim, its finish reason and token counts, and how it parsed.

Nothing is silently lost: a bad item line, an unreadable image, a modification that does not
apply to an item (with the reason), and a generation that failed all become ``Issue`` records.

Text hints go after the question inside the prompt's ``$question`` slot (METHODS §1.4 [REC]).
Images are preprocessed (METHODS §1.14) before the modification is drawn and padded to a square
afterwards when asked, so overlays land in the frame the model sees.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Literal

import anyio
import orjson
from faithjudge_client.lines import MAX_COT_CHARS, Baseline, Modification, ScoreRequest

from faithjudge.assets.prompts import load_inference_prompt
from faithjudge.errors import UserInputError
from faithjudge.scoring.modifications import ModificationSpec, lookup_modification
from faithjudge.sidecar.backends.base import VLMBackend
from faithjudge.sidecar.backends.protocols import Exchange, Prompted, ProtocolName, run_protocol
from faithjudge.sidecar.items import ItemLineError, SidecarItem, read_items

if TYPE_CHECKING:
    from PIL import Image

    from faithjudge.sidecar.perturb import ImagePool

__all__ = [
    "GenerationOptions",
    "GenerationSummary",
    "Generator",
    "Issue",
    "Outcome",
    "RunSpec",
    "generate_file",
    "parse_modifications",
    "parse_params",
    "read_pool",
]

Polarity = Literal["aligned", "misleading"]
IssueKind = Literal[
    "input_error", "image_error", "skipped", "perturbation_error", "generation_error"
]
_MAX_ANSWER = 2_000
_BASELINE = lookup_modification("baseline")


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One requested modification; bias cues carry a polarity (aligned or misleading)."""

    spec: ModificationSpec
    polarity: Polarity | None = None

    @property
    def label(self) -> str:
        return self.spec.code + (f":{self.polarity}" if self.polarity else "")


def parse_modifications(values: str | Iterable[str]) -> list[RunSpec]:
    """``"TB-RAD,VH-BB:..."`` (or a list of such strings) as run specs, in order, deduplicated.

    Codes are the modification catalogue's (Moll codes, service ids, aliases). A bias cue
    (a cue with a target answer) takes ``:aligned`` or ``:misleading``; without one it runs
    both. ``baseline`` is always run and need not be listed. Raises UserInputError (field
    ``modifications``) naming the bad entry.
    """
    parts = [values] if isinstance(values, str) else list(values)
    tokens = [t.strip() for part in parts for t in part.split(",") if t.strip()]
    runs: dict[str, RunSpec] = {}
    for token in tokens:
        code, _, polarity = token.partition(":")
        try:
            spec = lookup_modification(code)
        except UserInputError as exc:
            raise UserInputError(str(exc), field="modifications") from None
        polarity = polarity.strip().lower()
        if spec.id == "baseline":
            if polarity:
                raise UserInputError("baseline takes no polarity", field="modifications")
            continue
        if polarity and polarity not in ("aligned", "misleading"):
            raise UserInputError(
                f"{token!r}: the polarity must be 'aligned' or 'misleading'", field="modifications"
            )
        if polarity and not spec.targets_answer:
            raise UserInputError(
                f"{token!r}: {spec.code} points at no answer, so it takes no polarity",
                field="modifications",
            )
        wanted: tuple[Polarity | None, ...]
        if spec.targets_answer:
            wanted = (polarity,) if polarity else ("aligned", "misleading")  # type: ignore[assignment]
        else:
            wanted = (None,)
        for pol in wanted:
            run = RunSpec(spec, pol)
            runs.setdefault(run.label, run)
    return list(runs.values())


def parse_params(text: str | None) -> dict[str, dict[str, Any]]:
    """``'{"blur_sigma": {"sigma": 4}, "VO-BB": {...}}'`` as parameters per canonical code.

    Keys are any catalogue spelling of a code; values are objects handed to the perturbation
    (which checks each parameter). Raises UserInputError (field ``params``) for anything else.
    """
    if text is None or not text.strip():
        return {}
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise UserInputError(f"params is not valid JSON ({exc})", field="params") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise UserInputError(
            'params must map codes to objects, e.g. {"blur_sigma": {"sigma": 4}}', field="params"
        )
    out: dict[str, dict[str, Any]] = {}
    for code, params in data.items():
        try:
            out[lookup_modification(code).code] = params
        except UserInputError as exc:
            raise UserInputError(str(exc), field="params") from None
    return out


_POOL_KEYS = frozenset({"image_id", "label", "finding", "patient_id", "path", "embedding"})


def read_pool(path: Path, *, root: Path) -> ImagePool:
    """A candidate pool (``swap_same_label``, ``hard_negative``) from JSONL lines such as
    ``{"image_id": "p7", "label": "yes", "path": "p7.png", "patient_id": "P7"}``.

    ``path`` is relative to ``root`` (the images folder); images load lazily when a swap needs
    them. Raises UserInputError naming the line for anything malformed.
    """
    from faithjudge.sidecar.perturb import ImagePool, PoolEntry

    entries = []
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                data = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise UserInputError(f"pool line {number}: not valid JSON ({exc})") from None
            if not isinstance(data, dict) or not data.keys() <= _POOL_KEYS:
                raise UserInputError(
                    f"pool line {number}: expected an object with keys among "
                    f"{', '.join(sorted(_POOL_KEYS))}",
                    field="pool",
                )
            if not all(isinstance(data.get(k), str) for k in ("image_id", "label", "path")):
                raise UserInputError(
                    f"pool line {number}: image_id, label and path must be strings", field="pool"
                )
            entries.append(PoolEntry(**data))
    return ImagePool(entries, root=root)


@dataclass(frozen=True, slots=True)
class GenerationOptions:
    """How inputs are built and put to the model (everything here is recorded per line)."""

    modifications: tuple[RunSpec, ...] = ()
    protocol: ProtocolName = "single"
    prompt_version: str = "v1"
    seed: int = 0
    square_pad: bool = False
    pad_colour: tuple[int, int, int] | None = None
    min_grade_distance: int | None = None
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    max_image_bytes: int = 50_000_000
    max_image_pixels: int = 64_000_000
    max_image_decoded_bytes: int = 256 * 2**20
    """Memory an image may take once decoded (a small PNG can declare 8000x8000 pixels)."""
    max_image_side: int | None = 2048
    """Longer side an image is downscaled to on load (VLM processors resize smaller anyway)."""

    def describe(self) -> dict[str, Any]:
        prompt = load_inference_prompt(self.prompt_version)
        return {
            "modifications": [r.label for r in self.modifications],
            "protocol": self.protocol,
            "prompt": {"id": prompt.id, "sha256": prompt.sha256},
            "seed": self.seed,
            "square_pad": self.square_pad,
            "pad_colour": list(self.pad_colour) if self.pad_colour else None,
            "min_grade_distance": self.min_grade_distance,
            "params": {k: dict(v) for k, v in self.params.items()},
        }


@dataclass(frozen=True, slots=True)
class Issue:
    """Something that produced no line (or a line with less in it): kind, reason, where."""

    kind: IssueKind
    reason: str
    line: int | None = None
    item_id: str | None = None
    run: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            k: v
            for k, v in (
                ("line", self.line),
                ("item_id", self.item_id),
                ("run", self.run),
                ("kind", self.kind),
                ("reason", self.reason),
            )
            if v is not None
        }


@dataclass(slots=True)
class GenerationSummary:
    """What a CoT generation run did: items read, request lines written (baselines among them),
    issues by kind and the parse status of each output; checkpointed, so a resume counts on."""

    items: int = 0
    lines: int = 0
    baseline_lines: int = 0
    issues: dict[str, int] = field(default_factory=dict)
    parse_status: dict[str, int] = field(default_factory=dict)

    def add_issue(self, issue: Issue) -> None:
        self.issues[issue.kind] = self.issues.get(issue.kind, 0) + 1

    def to_json(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "lines": self.lines,
            "baseline_lines": self.baseline_lines,
            "issues": dict(sorted(self.issues.items())),
            "parse_status": dict(sorted(self.parse_status.items())),
        }


@dataclass(slots=True)
class _Run:
    item: SidecarItem
    line: int | None
    run: RunSpec | None  # None: the baseline
    question: str
    target: str | None
    recipe: dict[str, Any]
    images: tuple[Image.Image, ...]

    @property
    def label(self) -> str:
        return "baseline" if self.run is None else self.run.label


@dataclass(slots=True)
class Outcome:
    lines: list[ScoreRequest] = field(default_factory=list)
    issues: list[Issue] = field(default_factory=list)


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit]


class Generator:
    """Turns items into request lines with one backend and one set of options."""

    def __init__(
        self,
        backend: VLMBackend,
        options: GenerationOptions,
        *,
        images_root: Path | None = None,
        pool: ImagePool | None = None,
    ) -> None:
        from faithjudge.sidecar import images, perturb

        self._images = images
        self._perturb = perturb
        self.backend = backend
        self.options = options
        self.images_root = images_root
        self.pool = pool
        self._settings = dict(backend.settings())
        self._described = options.describe()

    def manifest(self) -> dict[str, Any]:
        """The run's settings, as written next to the output."""
        return {
            "backend": self.backend.id,
            "model": self.backend.model,
            "settings": self._settings,
            "options": self._described,
            "pool_images": len(self.pool) if self.pool is not None else None,
        }

    # ------------------------------------------------------------------ inputs

    def load(self, item: SidecarItem) -> Image.Image:
        """The item's image from the images root, preprocessed; ImageError when it cannot be."""
        if item.image is None:
            raise self._images.ImageError(
                f"item {item.item_id}", "no_image", "the item names no image"
            )
        if self.images_root is None:
            raise self._images.ImageError(item.image, "no_root", "no images directory was given")
        path = self._images.resolve_image_path(item.image, root=self.images_root)
        raw = self._images.load_image(
            path,
            max_bytes=self.options.max_image_bytes,
            max_pixels=self.options.max_image_pixels,
            max_decoded_bytes=self.options.max_image_decoded_bytes,
            max_side=self.options.max_image_side,
        )
        return self._images.preprocess(raw)

    def _target(self, item: SidecarItem, run: RunSpec) -> str:
        if run.polarity == "aligned":
            return item.canonical_truth
        return self._perturb.choose_misleading_target(
            item.to_perturb_item(),
            seed=self.options.seed,
            question_type=_kind(item),
            min_grade_distance=self.options.min_grade_distance,
        )

    def _params(self, item: SidecarItem, spec: ModificationSpec) -> dict[str, Any] | None:
        params = dict(self.options.params.get(spec.code) or {})
        if item.question_type is not None:  # the item's word beats inference from the options
            params.setdefault("question_type", _kind(item))
        return params or None

    def _build(
        self, item: SidecarItem, line: int | None, image: Image.Image, run: RunSpec | None
    ) -> _Run | Issue:
        label = "baseline" if run is None else run.label
        spec = _BASELINE if run is None else run.spec
        kind = _kind(item)
        if spec.question_types is not None and kind not in spec.question_types:
            allowed = ", ".join(sorted(spec.question_types))
            return Issue(
                "skipped",
                f"{spec.code} applies only to {allowed} questions, not {kind}",
                line,
                item.item_id,
                label,
            )
        code = "BASELINE" if run is None else spec.code
        try:
            target = None if run is None or run.polarity is None else self._target(item, run)
            perturbed = self._perturb.perturb(
                code,
                image,
                item.to_perturb_item(target),
                params=self._params(item, spec),
                seed=self.options.seed,
                pool=self.pool,
            )
        except self._perturb.NotApplicable as exc:
            return Issue("skipped", str(exc), line, item.item_id, label)
        except UserInputError as exc:
            return Issue("perturbation_error", str(exc), line, item.item_id, label)
        question = item.question if not perturbed.hint else f"{item.question}\n{perturbed.hint}"
        images: tuple[Image.Image, ...] = ()
        if perturbed.image is not None:
            shown = perturbed.image
            if self.options.square_pad:
                shown = self._images.pad_to_square(shown, self.options.pad_colour)
            images = (shown,)
        return _Run(item, line, run, question, target, dict(perturbed.recipe), images)

    def _plan(
        self, line: int | None, item: SidecarItem, given: Image.Image | None
    ) -> tuple[tuple[_Run, list[_Run]] | None, list[Issue]]:
        """The baseline and modified inputs of one item, and why any could not be built."""
        try:
            image = given if given is not None else self.load(item)
        except self._images.ImageError as exc:
            return None, [Issue("image_error", str(exc), line, item.item_id)]
        baseline = self._build(item, line, image, None)
        if isinstance(baseline, Issue):
            return None, [baseline]
        modified: list[_Run] = []
        issues: list[Issue] = []
        for run in self.options.modifications:
            built = self._build(item, line, image, run)
            if isinstance(built, Issue):
                issues.append(built)
            else:
                modified.append(built)
        return (baseline, modified), issues

    # ------------------------------------------------------------------ generation

    async def generate(
        self, entries: Sequence[tuple[int | None, SidecarItem, Image.Image | None]]
    ) -> Outcome:
        """Lines and issues for ``entries`` of (line, item, image or None to load it)."""
        outcome = Outcome()
        plans: list[tuple[_Run, list[_Run]]] = []
        for line, item, given in entries:
            # Decoding and pixel work off the event loop (the app keeps answering meanwhile).
            plan, issues = await anyio.to_thread.run_sync(self._plan, line, item, given)
            outcome.issues.extend(issues)
            if plan is not None:
                plans.append(plan)

        runs = [r for base, mods in plans for r in (base, *mods)]
        prompted = [Prompted(r.question, r.images, r.item.spec) for r in runs]
        exchanges = await run_protocol(
            self.backend,
            prompted,
            protocol=self.options.protocol,
            prompt_version=self.options.prompt_version,
        )
        by_run = {id(r): ex for r, ex in zip(runs, exchanges, strict=True)}
        for base, mods in plans:
            base_ex = by_run[id(base)]
            base_field: Baseline | None = None
            if base_ex.parsed is None:
                outcome.issues.append(
                    Issue(
                        "generation_error",
                        str(base_ex.error),
                        base.line,
                        base.item.item_id,
                        "baseline",
                    )
                )
            else:
                outcome.lines.append(self._request(base, base_ex, None))
                base_field = Baseline(
                    cot=_cap(base_ex.parsed.cot, MAX_COT_CHARS),
                    answer=_cap(base_ex.parsed.answer_raw or "", _MAX_ANSWER),
                )
            for run in mods:
                ex = by_run[id(run)]
                if ex.parsed is None:
                    outcome.issues.append(
                        Issue(
                            "generation_error", str(ex.error), run.line, run.item.item_id, run.label
                        )
                    )
                    continue
                outcome.lines.append(self._request(run, ex, base_field))
        return outcome

    def _request(self, run: _Run, ex: Exchange, baseline: Baseline | None) -> ScoreRequest:
        assert ex.parsed is not None
        parsed = ex.parsed
        item = run.item
        spec = _BASELINE if run.run is None else run.run.spec
        output: dict[str, Any] = {
            "raw": parsed.raw,
            "finish_reason": "length" if ex.truncated else "stop",
            "usage": ex.usage,
            "parse": parsed.summary(),
        }
        if len(ex.turns) > 1:
            output["turns"] = [g.text for g in ex.turns]
        if len(parsed.cot) > MAX_COT_CHARS:
            output["parse"]["issues"].append(f"CoT cut to {MAX_COT_CHARS} characters")
        sidecar = {
            "run": run.label,
            "role": "baseline" if run.run is None else "modified",
            "polarity": None if run.run is None else run.run.polarity,
            "backend": self.backend.id,
            "settings": self._settings,
            "options": self._described,
            "question_shown": run.question,
            "image": item.image,
            "image_sha256": _digest(run.images),
            "source_line": run.line,
            "perturbation": run.recipe,
            "output": output,
        }
        metadata: dict[str, Any] = {"sidecar": sidecar}
        if item.metadata:
            metadata["item"] = item.metadata
        return ScoreRequest(
            item_id=item.item_id,
            model=self.backend.model,
            question=item.question,
            question_type=item.question_type or item.spec.kind,
            ground_truth=item.ground_truth,
            cot=_cap(parsed.cot, MAX_COT_CHARS),
            # "" (not None) when the reply gave no answer: the scorer then records it as
            # unanswered instead of searching the reasoning for one.
            answer=_cap(parsed.answer_raw or "", _MAX_ANSWER),
            baseline=baseline,
            modification=Modification(code=spec.code, target_answer=run.target),
            metadata=_jsonable(metadata),
        )


def _kind(item: SidecarItem) -> str:
    return item.spec.kind or "spatial"


def _digest(images: Sequence[Image.Image]) -> str | None:
    if not images:
        return None
    digest = hashlib.sha256()
    for img in images:
        digest.update(f"{img.mode}{img.size}".encode())
        digest.update(img.tobytes())
    return digest.hexdigest()


def _jsonable(value: Any) -> Any:
    # Recipes may hold tuples and numpy scalars; the line must be plain JSON.
    return orjson.loads(orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY, default=str))


# ---------------------------------------------------------------------------- files


def request_line(request: ScoreRequest) -> bytes:
    """One JSONL line (no trailing newline) of a request, defaults left out."""
    return orjson.dumps(request.model_dump(mode="json", exclude_none=True))


def _fingerprint(items_path: Path, manifest: dict[str, Any]) -> str:
    """What a checkpoint is valid for: the items file's bytes and the generator's settings."""
    digest = hashlib.sha256()
    with items_path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    digest.update(orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS, default=str))
    return digest.hexdigest()


@contextmanager
def _open_at(path: Path, size: int | None) -> Iterator[BinaryIO]:
    """``path`` for writing: afresh (``size`` None) or cut back to ``size`` bytes to append."""
    handle: BinaryIO
    if size is None:
        handle = path.open("wb")
    else:
        handle = path.open("r+b") if path.exists() else path.open("w+b")
        handle.truncate(size)
        handle.seek(size)
    with handle:
        yield handle


@dataclass(frozen=True, slots=True)
class _Checkpoint:
    path: Path

    def resume_state(self, output: Path, fingerprint: str) -> dict[str, Any] | None:
        """The state to resume from, None to start afresh; refuses what it cannot continue."""
        hint = "pass --restart to generate it again from the start"
        if not self.path.exists():
            if output.exists() and output.stat().st_size > 0:
                raise UserInputError(
                    f"{output} exists and has no {self.path.name} to resume from; {hint}",
                    field="output",
                )
            return None
        try:
            state = orjson.loads(self.path.read_bytes())
            known = state["fingerprint"], state["out_bytes"], state["items_line"]
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise UserInputError(f"{self.path} is unreadable ({exc}); {hint}") from exc
        if known[0] != fingerprint:
            raise UserInputError(
                f"{output} was generated from other items or settings; {hint}", field="output"
            )
        if not output.exists() or output.stat().st_size < known[1]:
            raise UserInputError(f"{output} is shorter than its checkpoint; {hint}")
        resumed: dict[str, Any] = state
        return resumed

    def save(self, **state: Any) -> None:
        # write-then-rename: a crash leaves the previous checkpoint or this one, never half
        partial = self.path.with_name(self.path.name + ".tmp")
        partial.write_bytes(orjson.dumps(state))
        os.replace(partial, self.path)


async def generate_file(
    generator: Generator,
    items_path: Path,
    output: Path,
    *,
    chunk_items: int = 16,
    progress: Callable[[int], None] | None = None,
    restart: bool = False,
) -> GenerationSummary:
    """Generate every item of ``items_path`` into ``output`` (ScoreRequest JSONL).

    Issues go to ``<output>.issues.jsonl`` and the run's settings and counts to
    ``<output>.manifest.json``. Items are processed ``chunk_items`` at a time, so memory stays
    bounded and a batching backend sees every run of a chunk together.

    After each chunk a checkpoint (``<output>.checkpoint.json``) records how far the item file
    was read and how long both outputs were. A run that stops part-way (a crash, a lost GPU)
    resumes there when started again with the same items and settings: the outputs are cut back
    to the checkpoint and the items before it are not generated again. Other settings, or an
    output with no checkpoint, are refused unless ``restart`` starts afresh.
    """
    if chunk_items < 1:
        raise UserInputError("chunk_items must be >= 1", field="chunk_items")
    issues_path = output.with_name(output.name + ".issues.jsonl")
    manifest_path = output.with_name(output.name + ".manifest.json")
    checkpoint = _Checkpoint(output.with_name(output.name + ".checkpoint.json"))
    fingerprint = _fingerprint(items_path, generator.manifest())
    output.parent.mkdir(parents=True, exist_ok=True)
    state = None if restart else checkpoint.resume_state(output, fingerprint)
    summary = GenerationSummary(**state["summary"]) if state is not None else GenerationSummary()
    done_through = state["items_line"] if state is not None else 0
    if state is not None and progress is not None:
        progress(state["items_done"])
    with (
        _open_at(output, state["out_bytes"] if state is not None else None) as out,
        _open_at(issues_path, state["issues_bytes"] if state is not None else None) as bad,
    ):
        items_done = state["items_done"] if state is not None else 0

        def save(through: int) -> None:
            out.flush()
            bad.flush()
            checkpoint.save(
                fingerprint=fingerprint,
                items_line=through,
                items_done=items_done,
                out_bytes=out.tell(),
                issues_bytes=bad.tell(),
                summary=summary.to_json(),
            )

        async def flush(chunk: list[tuple[int | None, SidecarItem, None]]) -> None:
            nonlocal items_done
            outcome = await generator.generate(chunk)
            for request in outcome.lines:
                out.write(request_line(request) + b"\n")
                summary.lines += 1
                if request.modification is not None and request.modification.code == "baseline":
                    summary.baseline_lines += 1
                status = request.metadata["sidecar"]["output"]["parse"]["status"]
                summary.parse_status[status] = summary.parse_status.get(status, 0) + 1
            for issue in outcome.issues:
                bad.write(orjson.dumps(issue.to_json()) + b"\n")
                summary.add_issue(issue)
            items_done += len(chunk)
            save(chunk[-1][0] or 0)
            if progress is not None:
                progress(len(chunk))

        chunk: list[tuple[int | None, SidecarItem, None]] = []
        last_line = done_through
        for number, entry in read_items(items_path):
            if number <= done_through:
                continue
            last_line = number
            summary.items += 1
            if isinstance(entry, ItemLineError):
                issue = Issue("input_error", entry.reason, entry.line, entry.item_id)
                bad.write(orjson.dumps(issue.to_json()) + b"\n")
                summary.add_issue(issue)
                items_done += 1
                if progress is not None:
                    progress(1)
                continue
            chunk.append((number, entry, None))
            if len(chunk) >= chunk_items:
                await flush(chunk)
                chunk = []
        if chunk:
            await flush(chunk)
        save(last_line)
    manifest = {**generator.manifest(), "items": str(items_path), "summary": summary.to_json()}
    manifest_path.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    return summary
