"""A tiny LLaVA-style VLM (CLIP vision tower + Llama decoder), built offline from configs.

``build_tiny_vlm(folder)`` writes a processor (word-level tokenizer made here, CLIP image
processor with explicit sizes, a chat template) and a randomly initialised model with
``save_pretrained``, so the real ``transformers`` loading path (``AutoProcessor``,
``AutoModelForImageTextToText``) can read it back. Nothing is downloaded.

``scripted=True`` rewires the decoder into a fixed chain so that greedy decoding after the
prompt writes a well-formed tagged reply (``<think><step>...</step></think><answer>no</answer>``):
attention and MLP outputs are zeroed, so each position's hidden state is its own token's one-hot
embedding, and the output head maps each token to the next one of the script. The vision tower
still runs on every image.
"""

from __future__ import annotations

import itertools
from pathlib import Path

__all__ = ["SCRIPT", "build_tiny_vlm"]

SCRIPT = (
    "assistant:", "<think>", "<step>", "lungs", "look", "clear", "</step>", "</think>",
    "<answer>", "no", "</answer>", "</s>",
)  # fmt: skip
_WORDS = (
    "<unk>", "<pad>", "<s>", "</s>", "<image>", "user:", "system:", "assistant:",
    "<think>", "</think>", "<step>", "</step>", "<answer>", "</answer>", "<external_influence>",
    "</external_influence>", "yes", "no", "left", "right", "lungs", "look", "clear", "the", "is",
    "a", "of", "heart", "effusion", "there", "image", "chest", "x-ray", "answer", "step",
)  # fmt: skip
_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: "
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for p in m['content'] %}{% if p['type'] == 'image' %}<image> "
    "{% else %}{{ p['text'] }} {% endif %}{% endfor %}{% endif %}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def build_tiny_vlm(
    folder: Path,
    *,
    hidden: int = 48,
    layers: int = 1,
    image_size: int = 28,
    scripted: bool = False,
    seed: int = 0,
) -> Path:
    """Write a tiny VLM into ``folder`` and return it; ``hidden`` must be >= the vocabulary."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )
    from transformers.models.clip import CLIPImageProcessorPil

    vocab = {word: index for index, word in enumerate(_WORDS)}
    if scripted and hidden < len(vocab):
        raise ValueError(f"a scripted model needs hidden >= {len(vocab)}")
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token="<unk>",
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        extra_special_tokens={"image_token": "<image>"},
    )
    patch = image_size // 2
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": image_size},
        crop_size={"height": image_size, "width": image_size},
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=patch,
        vision_feature_select_strategy="default",
        chat_template=_TEMPLATE,
        image_token="<image>",
        num_additional_image_tokens=1,
    )
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=image_size,
            patch_size=patch,
            projection_dim=32,
        ),
        text_config=LlamaConfig(
            vocab_size=len(vocab),
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=1024,
            pad_token_id=vocab["<pad>"],
            bos_token_id=vocab["<s>"],
            eos_token_id=vocab["</s>"],
            tie_word_embeddings=False,
        ),
        image_token_index=vocab["<image>"],
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config)
    if scripted:
        with torch.no_grad():
            for name, param in model.named_parameters():
                if "language_model" in name and name.endswith(
                    ("o_proj.weight", "down_proj.weight")
                ):
                    param.zero_()
            embed = model.get_input_embeddings().weight
            embed.zero_()
            embed[:, : len(vocab)] = torch.eye(len(vocab))
            head = model.get_output_embeddings().weight
            head.zero_()
            for current, following in itertools.pairwise(SCRIPT):
                head[vocab[following], vocab[current]] = 10.0
    model.generation_config.pad_token_id = vocab["<pad>"]
    model.generation_config.eos_token_id = vocab["</s>"]
    folder.mkdir(parents=True, exist_ok=True)
    processor.save_pretrained(folder)
    model.save_pretrained(folder)
    return folder
