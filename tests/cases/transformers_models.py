"""Corpus: Hugging Face transformers models, installed by pip, built from tiny random configs.

Library code nobody here wrote, called as its users call it: ``model(input_ids=...)`` on the
library's own classes (no downloads: random weights from a small config, hidden size 32, 2 layers,
4 heads, a vocabulary of 256). Each architecture is run twice:

- ``<Class>Eval`` (``BertModelEval``, ``GPT2LMHeadModelEval``...): ``model.eval()`` under
  ``torch.no_grad()`` (tag ``"no_grad"``), the model output (a ``ModelOutput``) returned whole;
- ``<Class>Train``: ``model.train()`` (dropout draws from the case's seed: tag ``"rng"``), a scalar loss
  returned (the library's own loss where the model has a head and takes ``labels``, else the mean
  square of the last hidden state); tests/test_transformers.py runs its backward through aot_eager.
- ``<Class>CheckpointedTrain`` (BERT and LLaMA): the same with the library's gradient checkpointing
  on (``gradient_checkpointing_enable``, non-reentrant): each layer a ``torch.utils.checkpoint`` call.

The model is the case module's only child (``self.model``): the case's forward is the one line a
user writes around a library model. Without transformers installed the module declares no cases.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from pyframe.debug.cases import Inputs, case

try:
    import transformers
except ImportError:  # (the test extras install it; `compare` runs without it)
    transformers = None

VOCAB = 256
BATCH, SEQ = 2, 12


def _ids(seq: int = SEQ) -> torch.Tensor:
    return torch.randint(0, VOCAB, (BATCH, seq))


def _text() -> Inputs:
    return Inputs(kwargs={"input_ids": _ids()})


def _text_and_decoder() -> Inputs:
    return Inputs(kwargs={"input_ids": _ids(), "decoder_input_ids": _ids(6)})


def _images(size: int) -> Callable[[], Inputs]:
    return lambda: Inputs(kwargs={"pixel_values": torch.randn(BATCH, 3, size, size)})


_DECODER = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=64)
_ENCODER = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                vocab_size=VOCAB, max_position_embeddings=64)

# transformers' class name -> (model factory, inputs, whether the model takes `labels` and returns its
# own loss); the cases are named after it (`BertModelEval`, `LlamaForCausalLMTrain`).
ARCHITECTURES: dict[str, tuple[Callable[[], torch.nn.Module], Callable[[], Inputs], bool]] = {}

if transformers is not None:
    T = transformers
    ARCHITECTURES = {
        "BertModel": (lambda: T.BertModel(T.BertConfig(**_ENCODER)), _text, False),
        "GPT2LMHeadModel": (lambda: T.GPT2LMHeadModel(T.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=VOCAB,
                                                         n_positions=64, bos_token_id=0, eos_token_id=0)),
                 _text, True),
        "LlamaForCausalLM": (lambda: T.LlamaForCausalLM(T.LlamaConfig(**_DECODER)), _text, True),
        "T5Model": (lambda: T.T5Model(T.T5Config(d_model=32, num_layers=2, num_heads=4, d_ff=64, d_kv=8,
                                            vocab_size=VOCAB)), _text_and_decoder, False),
        "ViTModel": (lambda: T.ViTModel(T.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                              intermediate_size=64, image_size=16, patch_size=4)),
                _images(16), False),
        "BartModel": (lambda: T.BartModel(T.BartConfig(d_model=32, encoder_layers=2, decoder_layers=2,
                                                  encoder_attention_heads=4, decoder_attention_heads=4,
                                                  encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=VOCAB,
                                                  max_position_embeddings=64)), _text, False),
        "MistralModel": (lambda: T.MistralModel(T.MistralConfig(**_DECODER)), _text, False),
        "Qwen2Model": (lambda: T.Qwen2Model(T.Qwen2Config(**_DECODER)), _text, False),
        "DistilBertModel": (lambda: T.DistilBertModel(T.DistilBertConfig(dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                                                    vocab_size=VOCAB, max_position_embeddings=64)),
                       _text, False),
        "ResNetModel": (lambda: T.ResNetModel(T.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                                                        layer_type="basic")), _images(32), False),
        "MixtralModel": (lambda: T.MixtralModel(T.MixtralConfig(**_DECODER, num_local_experts=4, num_experts_per_tok=2)),
                    _text, False),
        "CLIPTextModel": (lambda: T.CLIPTextModel(T.CLIPTextConfig(**_ENCODER, bos_token_id=0, eos_token_id=1,
                                                              pad_token_id=1)), _text, False),
    }


# Architectures run in eval mode only (``<Class>Eval``), each with what differs from torch._dynamo's
# graphs. Their stacks skip the attention mask while compiling and then read it (None on the compiled
# path: tests/cases/compiled_path.py), so the stack's frame runs as Python under both engines; the
# frames it calls compile on their own. Run as Python, it calls torch.nn modules (Embedding, Dropout):
# pyframe compiles a torch.nn module's forward the hook meets (trace_rules.frame_skip_reason),
# torch._dynamo skips torch.nn's files as frames, so pyframe has a one-op graph more for each.
_NN_FRAMES = ("pyframe compiles the forward of each torch.nn module the stack's frame, run as Python, calls "
              "(Embedding, Dropout: one-op graphs); torch._dynamo skips torch.nn's frames")
EVAL_ONLY: dict[str, tuple[Callable[[], torch.nn.Module], Callable[[], Inputs], str]] = {}

if transformers is not None:
    _SEQ2SEQ = dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4, vocab_size=VOCAB)
    EVAL_ONLY = {
        "LongT5Model": (lambda: T.LongT5Model(T.LongT5Config(**_SEQ2SEQ)), _text_and_decoder, _NN_FRAMES),
        "SwitchTransformersModel": (lambda: T.SwitchTransformersModel(T.SwitchTransformersConfig(
            **_SEQ2SEQ, num_experts=4, expert_capacity=8)), _text_and_decoder,
            _NN_FRAMES + "; the dict comprehension of transformers' output capturing, met as a frame, "
            "loops over an iterator handed in (its `.0`) that pyframe does not model: it runs as Python"),
    }


def greedy_decode(step: Callable, model: torch.nn.Module, steps: int) -> torch.Tensor:
    """`steps` tokens decoded greedily from a fixed 5-token prompt with a `DynamicCache` (which grows
    by one position a step), calling `step` (the model, or a compiled model) under no_grad."""
    ids = torch.randint(0, VOCAB, (1, 5), generator=torch.Generator().manual_seed(1))
    cache = transformers.DynamicCache(config=model.config)
    with torch.no_grad():
        logits = step(input_ids=ids, past_key_values=cache, use_cache=True).logits
        for _ in range(steps):
            token = logits[:, -1:].argmax(-1)
            ids = torch.cat([ids, token], 1)
            logits = step(input_ids=token, past_key_values=cache, use_cache=True).logits
    return ids


def _eval_case(name: str, make_model: Callable[[], torch.nn.Module], inputs: Callable[[], Inputs],
               difference: str | None = None) -> type:
    class Eval(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = make_model().eval()

        def forward(self, **inputs: Any) -> Any:
            return self.model(**inputs)

    Eval.__name__ = Eval.__qualname__ = f"{name}Eval"
    Eval.__doc__ = f"transformers' {name} in eval mode under no_grad: the model output whole."
    return case(inputs=inputs, tags={"eval", "no_grad", "library"}, difference=difference)(Eval)


def _train_case(name: str, make_model: Callable[[], torch.nn.Module], inputs: Callable[[], Inputs],
                takes_labels: bool, checkpointed: bool = False) -> type:
    class Train(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = make_model().train()
            if checkpointed:
                self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})

        def forward(self, **inputs: Any) -> torch.Tensor:
            if takes_labels:
                return self.model(**inputs, labels=inputs["input_ids"]).loss
            return self.model(**inputs).last_hidden_state.pow(2).mean()

    Train.__name__ = Train.__qualname__ = f"{name}{'Checkpointed' if checkpointed else ''}Train"
    Train.__doc__ = (f"transformers' {name} in training mode{' with gradient checkpointing' if checkpointed else ''}: "
                     f"a scalar loss (backward in tests/test_transformers.py).")
    return case(inputs=inputs, tags={"train", "rng", "library"})(Train)


for _name, (_make, _inputs, _labels) in ARCHITECTURES.items():
    globals()[f"{_name}Eval"] = _eval_case(_name, _make, _inputs)
    globals()[f"{_name}Train"] = _train_case(_name, _make, _inputs, _labels)
    if _name in ("BertModel", "LlamaForCausalLM"):
        globals()[f"{_name}CheckpointedTrain"] = _train_case(_name, _make, _inputs, _labels, checkpointed=True)
for _name, (_make, _inputs, _difference) in EVAL_ONLY.items():
    globals()[f"{_name}Eval"] = _eval_case(_name, _make, _inputs, _difference)
