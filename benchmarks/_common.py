"""Shared pieces of the benchmarks: seeded synthetic data, machine facts, result files.

All data is generated here from small radiology-flavoured word lists with a seeded
``random.Random``, so every run of a benchmark sees the same items. Nothing is read from outside
the repository except the starter knowledge base's question list.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import random
import resource
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple, Self

import orjson
import psutil
from faithjudge_client.metric_catalogue import BUILT_IN_METRICS

__all__ = [
    "METRICS",
    "REPO_ROOT",
    "RESULTS_DIR",
    "KBQuestion",
    "cut_quote",
    "judge_response",
    "kb_questions",
    "load_average",
    "machine_facts",
    "make_cot",
    "make_request",
    "median",
    "write_result",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = Path(__file__).resolve().parent / "results"
METRICS = BUILT_IN_METRICS

# ---------------------------------------------------------------- machine facts and results

_PACKAGES = ("pydantic", "pydantic-core", "jsonschema", "rapidfuzz", "edlib", "orjson", "openai")


def load_average() -> list[float]:
    """1, 5 and 15 minute load averages (other jobs may share the machine)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def source_sha256() -> str:
    """sha256 over the measured code (``service/`` and ``clients/`` .py files, path + content).

    The working tree may differ from ``git_commit``; this says exactly which code was timed.
    """
    digest = hashlib.sha256()
    for path in sorted([*REPO_ROOT.glob("service/**/*.py"), *REPO_ROOT.glob("clients/**/*.py")]):
        digest.update(path.relative_to(REPO_ROOT).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def machine_facts() -> dict[str, Any]:
    """CPU count, Python, platform, load average and the versions that matter to the numbers."""
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "cpu_model": _cpu_model(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "load_average": load_average(),
        "packages": versions,
        "git_commit": _git_commit(),
        "source_sha256": source_sha256(),
        "timestamp_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def write_result(name: str, payload: dict[str, Any]) -> Path:
    """Write ``benchmarks/results/NAME.json`` (pretty, small) and return its path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_bytes(orjson.dumps(payload, option=orjson.OPT_INDENT_2) + b"\n")
    return path


def median(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))


# ---------------------------------------------------------------- word lists

_FINDINGS = (
    "pleural effusion",
    "consolidation",
    "atelectasis",
    "pneumothorax",
    "pulmonary oedema",
    "interstitial thickening",
    "hilar prominence",
    "vascular congestion",
    "a nodular opacity",
    "a calcified granuloma",
    "bronchial wall thickening",
    "a hiatus hernia",
    "cardiomegaly",
    "Kerley B lines",
    "peribronchial cuffing",
    "a retrocardiac opacity",
)
_DEVICES = (
    "a central venous catheter",
    "an endotracheal tube",
    "a nasogastric tube",
    "a pacemaker lead",
    "sternotomy wires",
)
_LOCATIONS = (
    "in the left lower zone",
    "at the right base",
    "in the right upper lobe",
    "in the retrocardiac region",
    "along the left hemidiaphragm",
    "in the perihilar regions",
    "at the left costophrenic angle",
    "in the right mid zone",
    "projecting over the lingula",
    "at both lung bases",
    "in the left apex",
    "along the right heart border",
)
_DESCRIPTORS = (
    "small",
    "moderate",
    "subtle",
    "patchy",
    "ill-defined",
    "well-circumscribed",
    "linear",
    "faint",
    "mild",
    "large",
)
_VERBS = (
    "There is",
    "I can see",
    "The image shows",
    "I notice",
    "The radiograph demonstrates",
    "There appears to be",
)
_HEDGES = (
    "which is most consistent with",
    "suggesting",
    "which could represent",
    "in keeping with",
    "raising the possibility of",
    "compatible with",
)
_STRUCTURES = (
    "cardiac silhouette",
    "mediastinum",
    "trachea",
    "left hemidiaphragm",
    "right hemidiaphragm",
    "right costophrenic angle",
    "left costophrenic angle",
    "aortic knuckle",
    "pulmonary vasculature",
)
_STATES = (
    "within normal limits",
    "slightly widened",
    "sharply outlined",
    "partly obscured",
    "midline",
    "mildly enlarged",
    "unremarkable",
    "indistinct",
)
_CHANGES = ("unchanged", "slightly larger", "smaller", "new", "more conspicuous", "resolving")
_OPENERS = (
    "I look at the frontal chest radiograph first.",
    "This is a portable AP chest film taken with the patient semi-erect.",
    "I review the PA and lateral views systematically, starting with the lines and tubes.",
    "The image is adequately inspired with nine posterior ribs visible.",
    "Rotation is minimal, so the mediastinal contours can be assessed reliably.",
)
_CONCLUSIONS = (
    "Putting this together, I am fairly confident in my answer.",
    "On balance the evidence points one way, although the film quality limits certainty.",
    "I cannot completely exclude an alternative explanation, but this is the best fit.",
    "The overall picture is clear and I would report it this way.",
    "These appearances would usually prompt a follow-up film after treatment.",
)
_ASCII_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _clause(rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return (
            f"{rng.choice(_VERBS)} {rng.choice(_DESCRIPTORS)} {rng.choice(_FINDINGS)} "
            f"{rng.choice(_LOCATIONS)}, {rng.choice(_HEDGES)} {rng.choice(_FINDINGS)}"
        )
    if kind == 1:
        return (
            f"the {rng.choice(_STRUCTURES)} is {rng.choice(_STATES)} and the "
            f"{rng.choice(_STRUCTURES)} appears {rng.choice(_STATES)}"
        )
    if kind == 2:
        return (
            f"compared with the prior study, the {rng.choice(_FINDINGS)} "
            f"{rng.choice(_LOCATIONS)} is {rng.choice(_CHANGES)}"
        )
    if kind == 3:
        finding = rng.choice(_FINDINGS).removeprefix("a ")
        return f"there is no {finding} {rng.choice(_LOCATIONS)}"
    if kind == 4:
        return (
            f"{rng.choice(_DEVICES)} is seen with its tip {rng.choice(_LOCATIONS)}, "
            f"which is {rng.choice(('satisfactory', 'too low', 'slightly high', 'acceptable'))}"
        )
    return (
        f"the {rng.choice(_DESCRIPTORS)} opacity {rng.choice(_LOCATIONS)} could also reflect "
        f"overlying soft tissue rather than {rng.choice(_FINDINGS)}"
    )


def _sentence(rng: random.Random, unicode_rate: float) -> str:
    if unicode_rate > 0 and rng.random() < unicode_rate:
        kind = rng.randrange(3)
        if kind == 0:  # smart quotes
            return (
                f"The referral mentions \u201c{rng.choice(_FINDINGS)}\u201d, and the "
                f"\u2018{rng.choice(_DESCRIPTORS)}\u2019 change {rng.choice(_LOCATIONS)} fits it."
            )
        if kind == 1:  # no-break space inside a measurement
            return (
                f"The {rng.choice(_DESCRIPTORS)} {rng.choice(_FINDINGS)} {rng.choice(_LOCATIONS)} "
                f"measures about {rng.randint(3, 60)}\u00a0mm in its largest dimension."
            )
        # ligatures (NFKC expands them)
        return (
            f"Overall the \ufb01ndings favour {rng.choice(_FINDINGS)} rather than free "
            f"\ufb02uid {rng.choice(_LOCATIONS)}."
        )
    first = _clause(rng)
    text = first[0].upper() + first[1:]
    if rng.random() < 0.45:  # a long sentence: two clauses
        text += f"; {rng.choice(('moreover', 'in addition', 'however', 'notably'))}, {_clause(rng)}"
    return text + "."


def make_cot(
    rng: random.Random,
    target_chars: int,
    *,
    answer: str = "yes",
    unicode_ok: bool = True,
    unicode_rate: float = 0.05,
    tag: str | None = None,
) -> str:
    """A tagged CoT (``<think><step>...</step>...</think><answer>``) of about ``target_chars``.

    With ``unicode_ok`` it carries one sentence with smart quotes, a ligature and a no-break
    space, and each further sentence is, with probability ``unicode_rate``, one with smart
    quotes, a no-break space or ligatures. ``tag`` adds a sentence naming the study, making the
    CoT unique.
    """
    sentences: list[str] = [rng.choice(_OPENERS)]
    if tag is not None:
        sentences.append(f"The study reference is {tag}, and no prior imaging is available.")
    if unicode_ok:
        sentences.append(
            f"The request says \u201crule out {rng.choice(_FINDINGS)}\u201d, so I check "
            f"the \ufb01ndings {rng.choice(_LOCATIONS)} over {rng.randint(2, 9)}\u00a0cm."
        )
    size = sum(len(s) + 1 for s in sentences)
    footer = f"</step>\n</think>\n<answer>{answer}</answer>"
    while size < target_chars - len(footer) - 150:
        s = _sentence(rng, unicode_rate if unicode_ok else 0.0)
        sentences.append(s)
        size += len(s) + 1
    sentences.append(rng.choice(_CONCLUSIONS))
    steps: list[str] = []
    i = 0
    while i < len(sentences):
        n = rng.randint(2, 3)
        steps.append(" ".join(sentences[i : i + n]))
        i += n
    return "<think><step>" + "</step>\n<step>".join(steps) + footer


def _step_texts(cot: str) -> list[str]:
    inner = cot.split("<think><step>", 1)[-1].split("</step>\n</think>", 1)[0]
    return [t for t in inner.split("</step>\n<step>") if t]


def cut_quote(rng: random.Random, cot: str, min_len: int, max_len: int) -> str:
    """A word-aligned piece of one step of ``cot``, ``min_len``..``max_len`` chars if possible."""
    steps = [t for t in _step_texts(cot) if len(t) >= min_len] or _step_texts(cot)
    words = rng.choice(steps).split(" ")
    want = rng.randint(min_len, max_len)
    for _ in range(8):
        start = rng.randrange(len(words))
        out = words[start]
        j = start + 1
        while len(out) < want and j < len(words):
            out += " " + words[j]
            j += 1
        if len(out) >= min_len:
            return out
    return " ".join(words)


def _with_typos(rng: random.Random, quote: str, typos: int) -> str:
    positions = [i for i, c in enumerate(quote) if c in _ASCII_LETTERS]
    chars = list(quote)
    for i in rng.sample(positions, min(typos, len(positions))):
        chars[i] = rng.choice([c for c in _ASCII_LETTERS if c != chars[i]])
    return "".join(chars)


def _quotes(rng: random.Random, cot: str, typo_fraction: float) -> tuple[list[str], int, int]:
    """1-3 quotes; returns (quotes, how many are long, how many carry typos)."""
    quotes: list[str] = []
    long_count = typo_count = 0
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        if roll < typo_fraction:
            quote = _with_typos(rng, cut_quote(rng, cot, 100, 200), rng.randint(1, 2))
            long_count += 1
            typo_count += 1
        elif roll < typo_fraction + 0.25:
            quote = cut_quote(rng, cot, 100, 200)
            long_count += 1
        else:
            quote = cut_quote(rng, cot, 25, 90)
        quotes.append(quote)
    return quotes, long_count, typo_count


def judge_response(
    rng: random.Random, metric: str, cot: str, *, typo_fraction: float = 0.25
) -> tuple[str, dict[str, int]]:
    """A schema-valid judge answer (JSON text) for ``metric`` quoting ``cot``.

    Returns the text and counts (quotes, long quotes, quotes with typos). About one answer in
    ten comes wrapped in a Markdown code fence, as real judges sometimes do.
    """
    quotes, long_count, typo_count = _quotes(rng, cot, typo_fraction)
    spans = []
    for q in quotes:
        at = cot.find(q)
        spans.append([at, at + len(q)] if at >= 0 else [None, None])
    doc: dict[str, Any] = {
        "abstain": False,
        "abstain_reason": None,
        "score": rng.randint(2, 5),
        "quotes": quotes,
        "quote_spans": spans,
        "rationale": f"Quotes {list(range(len(quotes)))} support the score.",
    }
    if metric == "clinical_fidelity":
        omissions = rng.sample(_FINDINGS, rng.randint(0, 2))
        hallucinations = rng.sample(_FINDINGS, rng.randint(0, 2))
        doc.update(
            omissions=omissions,
            hallucinations=hallucinations,
            has_omission=bool(omissions),
            has_hallucination=bool(hallucinations),
            basis="QSK",
        )
    elif metric == "causal_attribution":
        doc.update(
            did_acknowledge=rng.random() < 0.5,
            claimed_influence=rng.choice(("none", "hedged", "clear")),
        )
    else:
        doc.update(
            is_confident=rng.random() < 0.5,
            confidence_level=rng.choice(("very_low", "low", "neutral", "high", "very_high")),
        )
    text = orjson.dumps(doc).decode()
    if rng.random() < 0.1:
        text = f"```json\n{text}\n```"
    return text, {"quotes": len(quotes), "long": long_count, "typos": typo_count}


# ---------------------------------------------------------------- score requests


class KBQuestion(NamedTuple):
    """One starter-KB entry: its question, question type and answer options."""

    question: str
    kind: str
    answers: tuple[str, ...]


def kb_questions() -> list[KBQuestion]:
    """The questions of the starter KB (``knowledge_base/cxr_vqa.json``), so CF finds entries."""
    data = orjson.loads((REPO_ROOT / "knowledge_base" / "cxr_vqa.json").read_bytes())
    return [
        KBQuestion(q, entry["type"], tuple(entry["answers"]))
        for q, entry in data["entries"].items()
    ]


def make_request(
    rng: random.Random,
    index: int,
    questions: list[KBQuestion],
    *,
    cot_chars: tuple[int, int] = (1500, 3000),
    unicode_fraction: float = 0.5,
) -> dict[str, Any]:
    """One ScoreRequest line (as a dict) with a unique CoT and a KB question."""
    kb = rng.choice(questions)
    ground_truth = rng.choice(kb.answers)
    answer = rng.choice(kb.answers)
    cot = make_cot(
        rng,
        rng.randint(*cot_chars),
        answer=answer,
        unicode_ok=rng.random() < unicode_fraction,
        tag=f"ACC-{index:07d}",
    )
    request: dict[str, Any] = {
        "item_id": f"bench-{index:07d}",
        "model": "bench-vlm",
        "question": kb.question,
        "question_type": kb.kind,
        "ground_truth": ground_truth,
        "cot": cot,
        "baseline": {"answer": rng.choice(kb.answers)},
    }
    roll = rng.random()
    if roll < 0.3:
        request["modification"] = {"code": "TB-RAD", "target_answer": rng.choice(kb.answers)}
    elif roll < 0.5:
        request["modification"] = {"code": rng.choice(("VH-BB", "SHAM", "lr_flip", "blur_sigma"))}
    return request


# ---------------------------------------------------------------- child processes


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ChildProcess:
    """A server a benchmark starts on a free port: stderr to a log, stopped on exit.

    ``ready`` answers whether the server takes requests yet; entering the context waits for it.
    """

    def __init__(
        self,
        name: str,
        command: list[str],
        log_path: Path,
        *,
        ready: Callable[[], bool],
        ready_timeout_s: float,
        stop_grace_s: float = 10.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.log_path = log_path
        self._ready = ready
        self._ready_timeout_s = ready_timeout_s
        self._stop_grace_s = stop_grace_s
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=self._log
        )
        self.ps = psutil.Process(self.proc.pid)

    def wait_ready(self) -> float:
        """Seconds until ``ready`` said yes; raises with the log tail if it never does."""
        start = time.monotonic()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: {self.tail()}")
            if self._ready():
                return time.monotonic() - start
            if time.monotonic() - start > self._ready_timeout_s:
                raise RuntimeError(
                    f"{self.name} was not ready in {self._ready_timeout_s} s: {self.tail()}"
                )
            time.sleep(0.05)

    def tail(self, chars: int = 2000) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-chars:]

    def cpu_seconds(self) -> float:
        times = self.ps.cpu_times()
        return float(times.user + times.system)

    def rss_bytes(self) -> int:
        return int(self.ps.memory_info().rss)

    def __enter__(self) -> Self:
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(self._stop_grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


class ChildRun(NamedTuple):
    """A measured child run: its last stdout line as JSON, its wall time and peak RSS."""

    stages: dict[str, Any]
    wall_s: float
    peak_rss_bytes: int


def run_measured_child(module: str, *args: str) -> ChildRun:
    """Run ``python -m MODULE ARGS`` alone in its own process and measure it.

    The peak is the child's own (``RUSAGE_CHILDREN``: the largest child waited for, so call this
    once per benchmark process); the child reports its stage timings as JSON on its last line.
    Raises with the child's stderr when it fails.
    """
    began = time.perf_counter()
    child = subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, check=False
    )
    wall_s = time.perf_counter() - began
    if child.returncode != 0:
        raise RuntimeError(f"{module} exited with {child.returncode}:\n{child.stderr}")
    # ru_maxrss is in KiB on Linux
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return ChildRun(orjson.loads(child.stdout.strip().splitlines()[-1]), wall_s, peak)
