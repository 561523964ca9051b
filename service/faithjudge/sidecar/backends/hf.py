"""The ``transformers`` backend: a local image-text-to-text model, greedy, batched.

``AutoProcessor`` + ``AutoModelForImageTextToText`` from a local folder or a hub name (offline
use needs a folder). bf16 on CUDA, fp32 on CPU (METHODS §1.14 runs bf16 on one GPU); greedy
decoding (``do_sample=False``, ``num_beams=1``); prompts come from the processor's chat template.
Batches are left-padded so every row's generation starts right after its own prompt.

Generation runs in a worker thread (the event loop stays free for the app) under a lock (one
model, one batch at a time). A batch that runs out of GPU memory is split in halves; a batch that
fails otherwise is retried row by row, so one bad input costs only its own row.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import anyio

from faithjudge.errors import ConfigError
from faithjudge.sidecar.backends.base import Conversation, Generation

__all__ = ["TransformersBackend", "load_torch_stack"]


def load_torch_stack() -> tuple[Any, Any]:
    """Import ``torch`` and ``transformers``, or explain how to install them."""
    missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(
            f"the transformers backend needs {' and '.join(missing)}: "
            "pip install torch (CPU or CUDA build), then pip install 'faithjudge[sidecar]'"
        )
    return importlib.import_module("torch"), importlib.import_module("transformers")


def _chat_messages(conversation: Conversation) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for turn in conversation:
        content: list[dict[str, Any]] = [{"type": "image"} for _ in turn.images]
        content.append({"type": "text", "text": turn.text})
        messages.append({"role": turn.role, "content": content})
    return messages


class TransformersBackend:
    """A local VLM run with ``transformers``."""

    def __init__(
        self,
        model: str,
        *,
        device: str = "auto",
        max_new_tokens: int = 2048,
        batch_size: int = 8,
        dtype: str = "auto",
        trust_remote_code: bool = False,
        name: str | None = None,
    ) -> None:
        if max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        torch, transformers = load_torch_stack()
        self._torch = torch
        # torch.OutOfMemoryError is recent; older releases only have the CUDA one.
        self._oom = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if dtype == "auto":
            dtype = "bfloat16" if device.startswith("cuda") else "float32"
        torch_dtype = getattr(torch, dtype, None)
        if not isinstance(torch_dtype, torch.dtype):
            raise ConfigError(f"unknown dtype {dtype!r}; use float32, bfloat16 or float16")
        self._source = model
        self._name = name or (Path(model).name if Path(model).exists() else model)
        try:
            self._processor = transformers.AutoProcessor.from_pretrained(
                model, trust_remote_code=trust_remote_code
            )
            self._model = transformers.AutoModelForImageTextToText.from_pretrained(
                model, dtype=torch_dtype, trust_remote_code=trust_remote_code
            ).to(device)
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(f"cannot load the VLM {model!r}: {exc}") from exc
        self._model.eval()
        tokenizer = getattr(self._processor, "tokenizer", None)
        if tokenizer is None:
            raise ConfigError(f"the processor of {model!r} has no tokenizer")
        if getattr(self._processor, "chat_template", None) is None:
            raise ConfigError(f"the processor of {model!r} has no chat template")
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self._tokenizer = tokenizer
        eos = self._model.generation_config.eos_token_id
        eos_ids = list(eos) if isinstance(eos, list) else [eos] if eos is not None else []
        if tokenizer.eos_token_id is not None:
            eos_ids.append(tokenizer.eos_token_id)
        self._eos = frozenset(int(e) for e in eos_ids)
        self._device = device
        self._dtype = dtype
        self._max_new_tokens = max_new_tokens
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._versions = {"torch": torch.__version__, "transformers": transformers.__version__}

    @property
    def id(self) -> str:
        return f"transformers:{self._name}"

    @property
    def model(self) -> str:
        return self._name

    @property
    def batch_size(self) -> int:
        return self._batch_size

    def settings(self) -> Mapping[str, Any]:
        return {
            "backend": "transformers",
            "model": self._name,
            "source": self._source,
            "model_class": type(self._model).__name__,
            "device": self._device,
            "dtype": self._dtype,
            "do_sample": False,
            "num_beams": 1,
            "max_new_tokens": self._max_new_tokens,
            "batch_size": self._batch_size,
            "padding_side": "left",
            **self._versions,
        }

    async def generate(self, conversations: Sequence[Conversation]) -> list[Generation]:
        return await anyio.to_thread.run_sync(self.generate_sync, list(conversations))

    def generate_sync(self, conversations: list[Conversation]) -> list[Generation]:
        """Blocking form of :meth:`generate` (benchmarks and scripts)."""
        out: list[Generation] = []
        with self._lock:
            for start in range(0, len(conversations), self._batch_size):
                out.extend(self._run(conversations[start : start + self._batch_size]))
        return out

    def _run(self, batch: list[Conversation]) -> list[Generation]:
        try:
            return self._generate_batch(batch)
        except self._oom:
            if len(batch) == 1:
                return [Generation("", "error", error="out of memory on a single input")]
            self._torch.cuda.empty_cache()
            half = len(batch) // 2
            return self._run(batch[:half]) + self._run(batch[half:])
        except Exception as exc:  # one malformed input must not cost the whole batch
            if len(batch) == 1:
                return [Generation("", "error", error=f"{type(exc).__name__}: {exc}"[:500])]
            return [g for conv in batch for g in self._run([conv])]

    def _generate_batch(self, batch: list[Conversation]) -> list[Generation]:
        torch = self._torch
        texts = [
            self._processor.apply_chat_template(
                _chat_messages(conv), add_generation_prompt=True, tokenize=False
            )
            for conv in batch
        ]
        # One list of images per row: processors that batch per sample (Gemma 3, Idefics)
        # need the nesting, and those that flatten (LLaVA, Qwen2-VL) accept it.
        images = [[img for turn in conv for img in turn.images] for conv in batch]
        kwargs: dict[str, Any] = {"text": texts, "padding": True, "return_tensors": "pt"}
        if any(images):
            kwargs["images"] = images
        inputs = self._processor(**kwargs).to(self._device)
        if "pixel_values" in inputs and inputs["pixel_values"].is_floating_point():
            inputs["pixel_values"] = inputs["pixel_values"].to(self._model.dtype)
        with torch.inference_mode():
            output = self._model.generate(
                **inputs,
                do_sample=False,
                num_beams=1,
                max_new_tokens=self._max_new_tokens,
                pad_token_id=self._tokenizer.pad_token_id,
            )
        prompt_len = inputs["input_ids"].shape[1]
        prompt_tokens = inputs["attention_mask"].sum(dim=1).tolist()
        results = []
        for row, new in enumerate(output[:, prompt_len:].tolist()):
            ended = next((i for i, tok in enumerate(new) if tok in self._eos), None)
            tokens = new if ended is None else new[:ended]
            # Rows that finished early are padded with pad tokens up to the batch's longest row.
            if ended is None:
                tokens = _strip_trailing(tokens, self._tokenizer.pad_token_id)
            finish: Literal["stop", "length"] = (
                "stop" if ended is not None or len(new) < self._max_new_tokens else "length"
            )
            text = self._tokenizer.decode(tokens, skip_special_tokens=True)
            results.append(
                Generation(
                    text=text,
                    finish_reason=finish,
                    prompt_tokens=int(prompt_tokens[row]),
                    completion_tokens=len(tokens),
                )
            )
        return results

    async def aclose(self) -> None:
        self._model = None
        if self._device.startswith("cuda"):
            self._torch.cuda.empty_cache()


def _strip_trailing(tokens: list[int], pad: int | None) -> list[int]:
    end = len(tokens)
    while pad is not None and end and tokens[end - 1] == pad:
        end -= 1
    return tokens[:end]
