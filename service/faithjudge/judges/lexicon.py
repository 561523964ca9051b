"""The ``lexicon`` backend: an offline, deterministic judge that needs no API key.

It grades from the structured inputs of each request (``JudgeRequest.inputs``: the CoT, the
knowledge-base criteria, the modification description), never from the rendered prompt, with the
pure rules of ``faithjudge.scoring.lexicon`` and the word lists in
``knowledge_base/lexicons/``. Its output is the same strict JSON an LLM judge emits, so it goes
through the same verification. Cheap and deterministic, so it is never cached.

Specs: ``lexicon:v1`` or ``lexicon:default`` (the lexicons shipped with the service), or
``lexicon:DIR`` for another lexicon folder with the same files. ``settings()`` (hashed into every
result's provenance) names the rules version and the lexicon manifest's id, version and the
sha256 of each file, so a changed word list or rule changes the provenance of results.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from faithjudge.assets import asset_dir
from faithjudge.errors import ConfigError
from faithjudge.judges.base import JudgeRequest
from faithjudge.scoring.lexicon import RULES_VERSION, Lexicon, compile_lexicon, judge_metric
from faithjudge.transport.base import JudgeResponse

__all__ = ["DEFAULT_LEXICON_DIR", "LexiconJudge", "load_lexicon"]

# Through asset_dir, so an installed wheel (assets under service/_assets) finds them too.
DEFAULT_LEXICON_DIR = asset_dir("knowledge_base") / "lexicons"
_BUILTIN = {"v1", "default"}


def load_lexicon(directory: Path) -> tuple[Lexicon, dict[str, Any]]:
    """Read and compile the lexicon folder; also return its manifest and per-file sha256."""
    try:
        manifest = orjson.loads((directory / "manifest.json").read_bytes())
        raw = {name: (directory / name).read_bytes() for name in manifest["files"]}
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise ConfigError(f"cannot load the lexicon in {directory}: {exc}") from exc
    try:
        data = {Path(name).stem: orjson.loads(body) for name, body in raw.items()}
        lexicon = compile_lexicon(data)
    except KeyError as exc:
        raise ConfigError(
            f"invalid lexicon in {directory}: a file or key is missing: {exc} "
            f"(the manifest lists {sorted(raw)})"
        ) from exc
    except (orjson.JSONDecodeError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(f"invalid lexicon file in {directory}: {exc}") from exc
    hashes = {name: hashlib.sha256(body).hexdigest() for name, body in sorted(raw.items())}
    return lexicon, {"id": manifest.get("id"), "version": manifest.get("version"), "files": hashes}


class LexiconJudge:
    """Grades CF, CA and CT with word lists and knowledge-base matching (no network)."""

    reads_prompt = False  # grades from the request's inputs
    in_process = True

    def __init__(self, target: str = "v1") -> None:
        directory = DEFAULT_LEXICON_DIR if target in _BUILTIN else Path(target)
        self._name = "v1" if target in _BUILTIN else directory.name
        self._lexicon, self._manifest = load_lexicon(directory)

    @property
    def id(self) -> str:
        return f"lexicon:{self._name}"

    def settings(self) -> Mapping[str, Any]:
        return {"backend": "lexicon", "rules": RULES_VERSION, "lexicon": self._manifest}

    def cache_key_material(self, request: JudgeRequest) -> Mapping[str, Any] | None:
        return None  # cheap and deterministic: caching would only cost

    def should_retry(self, exc: BaseException) -> bool:
        return False

    def retry_after(self, exc: BaseException) -> float | None:
        return None

    async def judge(self, request: JudgeRequest) -> JudgeResponse:
        reply = judge_metric(self._lexicon, request.metric, request.inputs)
        return JudgeResponse(text=orjson.dumps(reply).decode(), model=self.id)

    async def aclose(self) -> None:
        return None
