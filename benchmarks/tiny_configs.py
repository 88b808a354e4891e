"""Tiny random configs and inputs for any Hugging Face transformers architecture, made generically
(for benchmarks/transformers_zoo.py; no table per model).

``tiny_config(model_type)`` takes the config class's defaults (``to_dict()``) and shrinks every size
it finds by its attribute's name (``shrink_dict``), in nested dicts too (sub-configs such as
text_config / vision_config, rope parameters): widths to 64, 4 heads (2 key/value heads where there
were fewer than heads), head dim 16, FFN 128, 2 layers, vocabulary 512, 128 positions, 64x64 images
in patches of 8, 4 experts. Divisibility holds by construction: every width is a multiple of 4 and a
head count is 1, 2 or 4. Per-stage lists (depths, widths, heads of a CNN or a Swin) keep their
length; per-layer lists (layer_types...) and dicts (per_layer_config) keep one layer of each kind
(a hybrid model keeps an attention layer and a linear one), and indices of layers are renumbered.
Special token ids past the new vocabulary are renumbered below it; the inputs avoid them.

``candidate_inputs(model, config)``: keyword arguments made from ``model.main_input_name``.
"""

from __future__ import annotations

import bisect
import inspect
import re
from typing import Any

import torch

BATCH, SEQ = 2, 8
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, LAYERS, MAX_LAYERS = 64, 4, 2, 16, 128, 2, 4
VOCAB, POSITIONS, IMAGE, PATCH, EXPERTS, TOP_K = 512, 128, 64, 8, 4, 2

LAYER_COUNTS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "depth")
_SPECIAL_ID = re.compile(r".*token_(id|ids|index)|.*_token|.*_id")
_KEEP = re.compile(r"original_.*|(max|min)_image_size|num_channels|.*in_channels|.*input_channels|.*_stride.*"
                   r"|.*kernel.*|num_labels|sampling_rate|num_mel_bins|feature_size|.*_ratios?")
_INT_RULES: list[tuple[str, Any]] = [  # (pattern, size to shrink to (at most) or a rule); the first match wins
    (r".*(key_value|kv)_heads|num_query_groups", "kv_heads"),
    (r".*head_dim|d_kv|kv_channels|.*head_size|dim_head|d_head|.*lora_rank|rotary_dim", HEAD_DIM),
    (r".*heads|n_head", "heads"),
    (r".*intermediate_size|.*ffn_dim|d_ff|n_inner|.*ffn_hidden_size|.*feedforward.*|mlp_dim|.*intermediate_dim"
     r"|d_inner|.*linear_units|dff|dim_ff|hidden_dim", FFN),
    (r".*hidden_size|.*hidden_dim|d_model|n_embd|dim|.*embed_dim|.*embedding_size|.*embedding_dim|codebook_dim"
     r"|.*projection_dim|.*proj_dim|.*_?width|d_latents|.*_channels", HIDDEN),
    (r".*feature_layer|.*layer_idx|first_k_.*", "layer_index"),
    (r".*layers|n_layer|.*depth|num_blocks", LAYERS),
    (r"n_group|topk_group", 1),
    (r".*groups", 4),  # (group norms and grouped convolutions: 4 divides every shrunk width)
    (r".*num_experts_per_tok.*|.*top_?k|num_experts_per_token", TOP_K),
    (r".*experts", EXPERTS),
    (r".*vocab_size", VOCAB),
    (r".*position_embeddings|n_positions|max_.*positions|n_ctx|max_seq_len|.*context_length", POSITIONS),
    (r"image_size|img_size|.*_image_size", IMAGE),
    (r".*patch_size", PATCH),
    (r"window_size", IMAGE // 32),  # (a Swin's windows fit its smallest feature map: 64 / 32)
]
_LIST_RULES: list[tuple[str, str]] = [  # lists of ints: per stage (their length kept), indices of layers
    (r".*depths?|blocks_per_stage|stage_num_blocks|.*block_repeats|.*num_layers.*", "depth"),
    (r".*heads.*", "heads"),
    (r".*hidden_sizes?|.*embed_dims?|.*_dims?|.*channels.*|conv_dim|tdnn_dim|.*_per_stage", "width"),
    (r".*section.*", "section"),
    (r".*(index|indexes|indices|idxs|layers|layer_ids|layer)", "layer_index"),
]
_STAGE_RULES = ("depth", "heads", "width")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_int_list(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and len(v) > 0 and all(_is_int(x) for x in v)


def _rule(rules: list[tuple[str, Any]], key: str) -> Any:
    return next((rule for pattern, rule in rules if re.fullmatch(pattern, key)), None)


def _heads(n: int) -> int:
    """A head count that divides every shrunk width (multiples of 4): the largest of 1, 2, 4 <= n."""
    return 4 if n >= 4 else 2 if n >= 2 else 1


def _width(n: int) -> int:
    """A per-stage width shrunk in proportion (equal widths stay equal), a multiple of 4."""
    return max(8, -(-(n // 16) // 4) * 4)


def _sections(value: list[int], total: int = HEAD_DIM // 2) -> list[int]:
    """Sections of the rotary dims (M-RoPE) scaled to sum to ``total``."""
    out = [max(1, v * total // max(sum(value), 1)) for v in value]
    out[-1] += total - sum(out)
    return out


def _layer_numbers(key: str, value: Any) -> bool:
    """Whether a per-layer list holds layer numbers (kv_source_layers), not flags (no_rope_layers)."""
    return _is_int_list(value) and _rule(_LIST_RULES, key) == "layer_index" and not set(value) <= {0, 1}


class Layers:
    """The layers kept at one level of a config: the first of each kind (the same entry in every
    per-layer list and dict), at least LAYERS, at most MAX_LAYERS; ``index`` renumbers a layer."""

    def __init__(self, d: dict[str, Any], count: int) -> None:
        self.count = count
        entries = [{int(k): e for k, e in v.items()} if isinstance(v, dict) else dict(enumerate(v))
                   for k, v in d.items() if self.per_layer(v) and not _layer_numbers(k, v)]
        columns = [tuple(repr(e.get(i)) for e in entries) for i in range(count)]
        keep = sorted({columns.index(c) for c in columns})[:MAX_LAYERS]
        keep += [i for i in range(count) if i not in keep][: max(0, min(LAYERS, count) - len(keep))]
        self.keep = sorted(keep)

    def per_layer(self, value: Any) -> bool:
        if isinstance(value, dict):  # per_layer_config: {"05": {...}}, keys layer numbers
            return bool(value) and all(str(k).isdigit() for k in value)
        return isinstance(value, list) and len(value) == self.count

    def select(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(self.keep.index(int(k))).zfill(len(str(k))): v for k, v in value.items()
                    if int(k) in self.keep}
        return [value[i] for i in self.keep]

    def index(self, i: int) -> int:
        n = len(self.keep)
        return max(0, bisect.bisect_right(self.keep, i) - 1) if i >= 0 else max(i, -n)


def _shrink_int(key: str, value: int, d: dict[str, Any], layers: Layers) -> int:
    rule = _rule(_INT_RULES, key)
    if rule == "heads":
        return _heads(value)
    if rule == "kv_heads":  # grouped-query attention stays grouped: fewer kv heads than heads
        heads = next((v for k, v in d.items() if re.fullmatch(r".*attention_heads|n_head|num_heads", k) and _is_int(v)),
                     value)
        return min(value, KV_HEADS if value < heads else HEADS)
    if rule == "layer_index":
        return layers.index(value)
    return value if rule is None else min(value, rule)


def _shrink_list(key: str, value: list[int], d: dict[str, Any], layers: Layers) -> list[int]:
    rule = _rule(_LIST_RULES, key)
    if rule == "depth":
        return [min(v, 1) for v in value]
    if rule == "heads":
        return [_heads(v) for v in value]
    if rule == "width":
        return [_width(v) for v in value]
    if rule == "section":
        return _sections(value)
    if rule == "layer_index":
        return list(dict.fromkeys(layers.index(v) for v in value))
    return [_shrink_int(key, v, d, layers) for v in value]


def shrink_dict(d: dict[str, Any], ids: dict[int, int]) -> dict[str, Any]:
    """``d`` (a config's ``to_dict()``) with every size shrunk, nested dicts too. Special token ids
    from VOCAB up are renumbered below it (``ids``: the renumbering, shared by all the sub-configs)."""
    # A count of layers equal to the length of a per-stage list counts stages: it is kept.
    stages = {len(v) for k, v in d.items() if isinstance(k, str) and _is_int_list(v) and _rule(_LIST_RULES, k) in _STAGE_RULES}
    count_key = next((k for k in LAYER_COUNTS if _is_int(d.get(k)) and d[k] not in stages), None)
    layers = Layers(d, d[count_key] if count_key else LAYERS)
    out: dict[str, Any] = {}
    for key, value in d.items():
        if not isinstance(key, str) or key.endswith(("id2label", "label2id")):
            out[key] = value
            continue
        if key in ("out_features", "out_indices"):  # (a backbone's outputs: left to the default, the last stage)
            continue
        if key == count_key:
            out[key] = len(layers.keep)
            continue
        if count_key and layers.per_layer(value):  # one entry per layer: the kept layers', each shrunk
            value = layers.select(value)
            if _is_int_list(value):
                out[key] = [layers.index(v) if _layer_numbers(key, value) else _shrink_int(key, v, d, layers)
                            for v in value]
                continue
        if isinstance(value, dict):
            out[key] = shrink_dict(value, ids)
        elif _SPECIAL_ID.fullmatch(key) and (_is_int(value) or _is_int_list(value)):
            renumber = lambda i: ids.setdefault(i, VOCAB - 1 - len(ids)) if i >= VOCAB else i  # noqa: E731
            out[key] = renumber(value) if _is_int(value) else [renumber(v) for v in value]
        elif _KEEP.fullmatch(key) or _is_int(value) and value in stages and _rule(_INT_RULES, key) == LAYERS:
            out[key] = value  # (a count of stages: num_feat_extract_layers with conv_dim's 7 entries)
        elif _is_int(value):
            out[key] = _shrink_int(key, value, d, layers)
        elif _is_int_list(value):
            out[key] = type(value)(_shrink_list(key, list(value), d, layers))
        else:
            out[key] = value
    if {"qk_head_dim", "qk_nope_head_dim", "qk_rope_head_dim"} <= out.keys():  # (a sum, DeepSeek's MLA)
        out["qk_head_dim"] = out["qk_nope_head_dim"] + out["qk_rope_head_dim"]
    return out


def tiny_config(model_type: str) -> Any:
    """The shrunk config of ``model_type``; ``config.zoo_special_ids``: token ids the inputs avoid."""
    from transformers import CONFIG_MAPPING

    config_class = CONFIG_MAPPING[model_type]
    ids: dict[int, int] = {}
    config = config_class.from_dict(shrink_dict(config_class().to_dict(), ids))
    for c in [config] + [getattr(config, k, None) for k in getattr(config, "sub_configs", {})]:
        # M-RoPE sections a config class allows in its rope parameters but leaves to the model's
        # code, whose default is for the full-size head dim.
        rope = getattr(c, "rope_parameters", None)
        if "mrope_section" in getattr(c, "ignore_keys_at_rope_validation", ()) and isinstance(rope, dict):
            rope.setdefault("mrope_section", _sections([2, 3, 3]))
    config.zoo_special_ids = sorted(set(ids.values()) | set(_special_ids(config.to_dict())))
    return config


def _special_ids(d: dict[str, Any]) -> list[int]:
    found = []
    for key, value in d.items():
        if isinstance(value, dict):
            found += _special_ids(value)
        elif isinstance(key, str) and _SPECIAL_ID.fullmatch(key):
            found += [value] if _is_int(value) else [v for v in value if _is_int(v)] if isinstance(value, list) else []
    return found


# --------------------------------------------------------------------------------------------------
# Inputs


def _find(config: Any, *names: str, default: Any = None) -> Any:
    """The first of ``names`` set on ``config`` or on one of its sub-configs (vision_config...)."""
    subs = [getattr(config, k, None) for k in getattr(config, "sub_configs", {})]
    for c in [config] + [s for s in subs if s is not None]:
        for name in names:
            if getattr(c, name, None) is not None:
                return getattr(c, name)
    return default


def candidate_inputs(model: torch.nn.Module, config: Any) -> list[dict[str, torch.Tensor]]:
    """Keyword arguments to try, in order (the first eager accepts is used), made from
    ``model.main_input_name`` and the config: token ids (decoder ids too for an encoder-decoder),
    images, audio features or raw audio, with images or token ids added where ``forward`` takes
    them (a CLIP needs both)."""
    params = inspect.signature(model.forward).parameters
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    vocab = min(getattr(text, "vocab_size", None) or VOCAB, VOCAB)
    allowed = torch.tensor([i for i in range(vocab) if i not in set(getattr(config, "zoo_special_ids", ()))] or [0])
    ids = lambda n: allowed[torch.randint(0, len(allowed), (BATCH, n))]  # noqa: E731
    size = _find(config, "image_size", default=IMAGE)
    h, w = (size, size) if isinstance(size, int) else tuple(size)[-2:]
    images = torch.randn(BATCH, _find(config, "num_channels", default=3), h, w)
    mel = _find(config, "num_mel_bins", "input_feat_per_channel", "feature_size", default=80)
    frames = 2 * _find(config, "max_source_positions", default=SEQ * 4)
    main = {
        "input_ids": [ids(SEQ)],
        "pixel_values": [images, images.unsqueeze(1).expand(BATCH, 2, *images.shape[1:]).contiguous()],
        "input_features": [torch.randn(BATCH, mel, frames), torch.randn(BATCH, frames, mel)],
        "input_values": [torch.randn(BATCH, 4000), torch.randn(BATCH, 1, 4000),
                         torch.randn(BATCH, _find(config, "max_length", default=SEQ * 8), mel)],
    }.get(model.main_input_name, [])
    extras: list[dict[str, torch.Tensor]] = [{}]
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        extras = [{"decoder_input_ids": ids(SEQ // 2)}]
    if "pixel_values" in params and model.main_input_name != "pixel_values":
        extras += [{**e, "pixel_values": images} for e in extras]
    if "input_ids" in params and model.main_input_name != "input_ids":
        extras += [{**e, "input_ids": ids(SEQ)} for e in extras]
    return [{model.main_input_name: m, **e} for m in main for e in extras]
