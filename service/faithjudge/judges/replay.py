"""The ``replay`` backend: answers recorded earlier, read from a JSONL file.

Each line is ``{"item_id", "metric", "response", "judge"?}``; ``response`` is the judge's JSON
object, its raw text, or null. A file may hold several judges; ``judge`` picks one. Replayed
answers go through the same verification as live ones, which makes this backend the tool for
audits and reproductions. It is never cached (the file already is the record).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
from faithjudge_client.metric_catalogue import metric_names

from faithjudge.errors import ConfigError, JudgeError
from faithjudge.judges.base import JudgeRequest
from faithjudge.transport.base import JudgeResponse

__all__ = ["ReplayJudge"]

_Key = tuple[str, str]


def _describe(judges: set[str | None]) -> str:
    return ", ".join(sorted(j if j is not None else "(unnamed)" for j in judges))


class ReplayJudge:
    """Serves the recorded response of each (item, metric) from ``path``."""

    reads_prompt = False  # grades from the request's inputs
    in_process = True

    def __init__(self, path: str | Path, *, judge: str | None = None) -> None:
        self._path = Path(path)
        self._judge = judge
        try:
            raw = self._path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read the replay file {self._path}: {exc.strerror}") from exc
        self._sha256 = hashlib.sha256(raw).hexdigest()
        self._model: str | None = None
        self._records = self._load(raw)

    def _load(self, raw: bytes) -> dict[_Key, str]:
        by_judge: dict[str | None, dict[_Key, tuple[str, int]]] = {}
        for lineno, line in enumerate(raw.splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{self._path}:{lineno}"
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise ConfigError(f"{where}: not valid JSON ({exc})") from exc
            if not isinstance(obj, dict):
                raise ConfigError(f"{where}: expected a JSON object")
            item_id, metric = obj.get("item_id"), obj.get("metric")
            if not isinstance(item_id, str) or not item_id:
                raise ConfigError(f"{where}: 'item_id' must be a non-empty string")
            if metric not in metric_names():
                raise ConfigError(f"{where}: 'metric' must be one of {', '.join(metric_names())}")
            if "response" not in obj:
                raise ConfigError(f"{where}: 'response' is missing (use null for no answer)")
            judge = obj.get("judge")
            if judge is not None and not isinstance(judge, str):
                raise ConfigError(f"{where}: 'judge' must be a string")
            text = self._text(obj["response"], where)
            records = by_judge.setdefault(judge, {})
            previous = records.get((item_id, metric))
            # Recordings repeat identical lines (a re-run appended); only conflicts are errors,
            # and only for the judge that is replayed.
            if previous is not None and previous[0] != text and judge == (self._judge or judge):
                raise ConfigError(
                    f"{where}: a second response for item {item_id} metric {metric}"
                    f" (first at line {previous[1]})"
                )
            if previous is None:
                records[(item_id, metric)] = (text, lineno)

        judges = set(by_judge)
        # A file with one judge needs no selection; its name still labels the responses.
        self._model = self._judge if self._judge is not None else next(iter(judges), None)
        if self._judge is not None:
            if self._judge not in by_judge:
                raise ConfigError(
                    f"{self._path}: no judge {self._judge!r}; the file has: "
                    f"{_describe(judges) or 'no records'}"
                )
            chosen = by_judge[self._judge]
        elif len(judges) > 1:
            raise ConfigError(
                f"{self._path} holds several judges ({_describe(judges)}): pick one with "
                f"replay:{self._path}#JUDGE"
            )
        else:
            chosen = next(iter(by_judge.values()), {})
        return {key: text for key, (text, _) in chosen.items()}

    @staticmethod
    def _text(response: Any, where: str) -> str:
        if response is None:
            return ""
        if isinstance(response, str):
            return response
        if isinstance(response, dict):
            return orjson.dumps(response).decode()
        raise ConfigError(f"{where}: 'response' must be an object, a string or null")

    @property
    def id(self) -> str:
        suffix = f"#{self._judge}" if self._judge is not None else ""
        return f"replay:{self._path.name}{suffix}"

    def __len__(self) -> int:
        return len(self._records)

    def settings(self) -> Mapping[str, Any]:
        return {"path": str(self._path), "judge": self._judge, "sha256": self._sha256}

    def cache_key_material(self, request: JudgeRequest) -> Mapping[str, Any] | None:
        return None

    def should_retry(self, exc: BaseException) -> bool:
        return False

    def retry_after(self, exc: BaseException) -> float | None:
        return None

    async def judge(self, request: JudgeRequest) -> JudgeResponse:
        text = None
        if request.item_id is not None:
            text = self._records.get((request.item_id, request.metric))
        if text is None:
            raise JudgeError(
                f"no recorded response for item {request.item_id} metric {request.metric}",
                status=None,
            )
        return JudgeResponse(text=text, model=self._model)

    async def aclose(self) -> None:
        return None
