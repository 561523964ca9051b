"""The ``[score]`` table of a FaithJudge TOML file: what ``faithjudge score --config`` runs.

It sits beside the gate's tables (``[gate]``, ``[quality]``, ``[coverage]``, ``[regression]``,
read by ``faithjudge.reports.gate``) in one file, so a CI repository keeps how it scores and how
it gates together. Every key is optional; a command-line option overrides its key::

    [score]
    input = "cots.jsonl"          # IN.jsonl
    output = "results.jsonl"      # --output
    judge = "lexicon:v1"
    concurrency = 8
    prompt_set = "v2"             # a name, or a folder
    knowledge_base = "cxr_vqa"    # a name, or a JSON file
    data_dir = ".faithjudge"      # where the response cache lives
    cache = true

Relative paths (``input``, ``output``, ``data_dir``, and a prompt set or knowledge base written
as a path or found there) are read from the config file's folder, so the file means the same
whatever the directory a command runs in. Other tables are left to the gate. The key ``judge``
was called ``evaluator`` before: that name is still read, with a warning.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from faithjudge.errors import UserInputError
from faithjudge.jsonl import describe_validation_error
from faithjudge.toml_file import read_toml, unknown_keys

__all__ = ["ScoreConfig", "load_score_config"]


class ScoreConfig(BaseModel):
    """The ``[score]`` table, paths resolved."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    input: Path | None = None
    output: Path | None = None
    judge: str | None = Field(default=None, min_length=1)
    concurrency: int | None = Field(default=None, ge=1, le=10_000)
    prompt_set: str | None = Field(default=None, min_length=1)
    knowledge_base: str | None = Field(default=None, min_length=1)
    data_dir: Path | None = None
    cache: bool | None = None


def _asset(folder: Path, value: str | None) -> str | None:
    """A prompt set or knowledge base: a path beside the config when one exists there or the
    value is written as a path (as the loaders tell one: a slash, or a ``.json`` file), else a
    name."""
    if value is None:
        return None
    beside = folder / value
    # a path that is missing beside the config must be named there, not looked for in the
    # directory the command happens to run in
    as_path = "/" in value or "\\" in value or value.endswith(".json")
    return str(beside) if not Path(value).is_absolute() and (as_path or beside.exists()) else value


def load_score_config(path: Path) -> ScoreConfig:
    """Read ``path``'s ``[score]`` table.

    Raises:
        ConfigError: an unreadable file or invalid TOML.
        UserInputError: no ``[score]`` table, or a key that is unknown or of the wrong type
            (named with the file).
    """
    data = read_toml(path)
    table = data.get("score")
    if table is None:
        raise UserInputError(
            f"{path} has no [score] table (the options of faithjudge score)", field="config"
        )
    if not isinstance(table, dict):
        raise UserInputError(f"{path}: [score] must be a table", field="config")
    if "evaluator" in table:  # the key's name before the rename, still read
        if "judge" in table:
            raise UserInputError(
                f"{path}: [score] has both judge and evaluator, the deprecated name of judge: "
                "keep judge alone",
                field="config",
            )
        print(f"warning: {path}: [score] evaluator is deprecated: name it judge", file=sys.stderr)
        table = {("judge" if key == "evaluator" else key): value for key, value in table.items()}
    # before pydantic, whose "Extra inputs are not permitted" names no key it would take instead
    problem = unknown_keys("score", table, ScoreConfig.model_fields)
    if problem is not None:
        raise UserInputError(f"{path}: {problem}", field="config")
    # TOML has no path type: paths are strings, checked as such before they become paths
    paths = {k: v for k, v in table.items() if k in ("input", "output", "data_dir")}
    for key, value in paths.items():
        if not isinstance(value, str) or not value:
            raise UserInputError(
                f"{path}: [score] {key}: a path (a non-empty string), got {value!r}",
                field="config",
            )
    try:
        config = ScoreConfig.model_validate(
            {k: v for k, v in table.items() if k not in paths}
            | {k: Path(v) for k, v in paths.items()}
        )
    except ValidationError as exc:
        raise UserInputError(
            f"{path}: [score] {describe_validation_error(exc)}", field="config"
        ) from None
    folder = path.parent

    def beside(value: Path | None) -> Path | None:
        return None if value is None else folder / value.expanduser()

    return config.model_copy(
        update={
            "input": beside(config.input),
            "output": beside(config.output),
            "data_dir": beside(config.data_dir),
            "prompt_set": _asset(folder, config.prompt_set),
            "knowledge_base": _asset(folder, config.knowledge_base),
        }
    )
