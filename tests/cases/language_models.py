"""Corpus: decoder and encoder-decoder language models in the styles their projects write them
(small sizes, CPU, written here).

Each model is run in eval mode under ``torch.no_grad()`` (tag ``"no_grad"``) and, where it makes
sense, in training mode (dropout and drop-path draw random numbers: tag ``"rng"`` has the harness
start every call from the case's seed).

- ``NanoGPT``: a GPT-2-style decoder as nanoGPT writes it: an ``nn.ModuleDict`` of embeddings, a
  causal mask kept as a registered buffer and sliced to the sequence, ``split`` of one qkv Linear,
  ``masked_fill`` with ``-inf``, tied input and output embeddings, an ``assert`` on the input's length,
  and a loss branch on an optional ``targets`` argument (``F.cross_entropy`` with ``ignore_index``);
- ``RotaryAttention``: rotary position embeddings (``einsum`` of positions and an inverse-frequency
  buffer, ``cat((-x2, x1))``) in front of ``F.scaled_dot_product_attention`` (causal).
- ``GPT2``: Hugging Face's GPT-2: ``Conv1D`` (``addmm`` with an (in, out) weight), ``_split_heads``
  with ``size()[:-1] + (...)``, ``past_key_values`` tuples in and ``presents`` out, ``attention_mask``
  broadcast with ``torch.finfo(self.dtype).min`` (``dtype`` a property walking the parameters),
  ``torch.where`` on a bool causal buffer, ``NewGELUActivation``, a shifted-label loss;
- ``Llama``: ``LlamaRMSNorm`` (float32 upcast), SwiGLU MLP, rotary embeddings with cached cos/sin
  buffers indexed by ``position_ids``, grouped-query attention with ``repeat_interleave``;
- ``WhisperDecode``: openai/whisper's text decoder: a kv-cache dict keyed by modules, filled by
  forward hooks whose closure holds it, ``next(iter(kv_cache.values()))``, ``nn.Linear`` and
  ``nn.LayerNorm`` subclasses casting dtypes, greedy steps feeding back the last token;
- ``T5Encoder``: Hugging Face T5: ``_relative_position_bucket`` (a ``staticmethod``,
  ``relative_buckets = 0; relative_buckets += tensor``, ``torch.log``, ``torch.where``),
  ``T5LayerNorm``, the position bias computed by the first layer and passed on;
- ``MoE``: a top-2 gate with dense dispatch as GShard/fairseq write it: ``argmax``, ``F.one_hot``,
  ``cumsum`` capacity positions, ``gates1_s /= denom_s``, ``einsum`` dispatch and combine, ``*input``
  varargs, the auxiliary loss stored on the module;
- ``MegatronMLPTrain``: Megatron-LM's MLP with its ``@torch.jit.script`` fused bias-GeLU.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from pyframe.debug.cases import Inputs, case

# ------------------------------------------------------------------------------------------------
# nanoGPT (karpathy/nanoGPT)

class _CausalAttention(nn.Module):
    def __init__(self, width: int, heads: int, context: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.heads, self.width = heads, width
        mask = torch.tril(torch.ones(context, context)).view(1, 1, context, context)
        self.register_buffer("mask", mask)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.size()
        q, k, v = self.qkv(x).split(self.width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        scores = scores.masked_fill(self.mask[:, :, :length, :length] == 0, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(batch, length, width))


class _DecoderBlock(nn.Module):
    def __init__(self, width: int, heads: int, context: int) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = _CausalAttention(width, heads, context)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    vocab, width, context = 50, 32, 16

    def __init__(self) -> None:
        super().__init__()
        self.transformer = nn.ModuleDict({
            "wte": nn.Embedding(self.vocab, self.width), "wpe": nn.Embedding(self.context, self.width),
            "h": nn.ModuleList([_DecoderBlock(self.width, 4, self.context) for _ in range(2)]),
            "ln_f": nn.LayerNorm(self.width),
        })
        self.lm_head = nn.Linear(self.width, self.vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        _, length = idx.size()
        assert length <= self.context, f"sequence of {length} tokens is longer than {self.context}"
        pos = torch.arange(0, length, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is None:
            return self.lm_head(x[:, [-1], :]), None
        logits = self.lm_head(x)
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


def _tokens() -> torch.Tensor:
    return torch.randint(0, NanoGPT.vocab, (2, 8))


@case(inputs=_tokens, tags={"eval"})
class NanoGPTGenerate(NanoGPT):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=lambda: (_tokens(), _tokens()), tags={"train"})
class NanoGPTLoss(NanoGPT):
    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# Rotary position embeddings before scaled dot-product attention

@case(inputs=lambda: torch.randn(2, 6, 16))
class RotaryAttention(nn.Module):
    def __init__(self, width: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.heads, self.head_dim = heads, width // heads
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def rotate(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.arange(x.shape[-2], device=x.device).type_as(self.inv_freq)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return x * emb.cos()[None, None] + torch.cat((-x2, x1), dim=-1) * emb.sin()[None, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.unflatten(-1, (self.heads, self.head_dim)).transpose(1, 2) for t in (q, k, v))
        out = F.scaled_dot_product_attention(self.rotate(q), self.rotate(k), v, is_causal=True)
        return out.transpose(1, 2).flatten(2)


# ------------------------------------------------------------------------------------------------
# GPT-2 (Hugging Face transformers)


class Conv1D(nn.Module):
    """1D-convolutional layer as defined by Radford et al. for OpenAI GPT: a linear layer with a transposed weight."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        x = x.view(size_out)
        return x


class NewGELUActivation(nn.Module):
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


class GPT2Config:
    vocab_size = 64
    n_positions = 32
    n_embd = 32
    n_layer = 2
    n_head = 4
    n_inner = None
    resid_pdrop = 0.1
    embd_pdrop = 0.1
    attn_pdrop = 0.1
    layer_norm_epsilon = 1e-5
    scale_attn_weights = True
    use_cache = True


class GPT2Attention(nn.Module):
    def __init__(self, config, is_cross_attention=False):
        super().__init__()
        max_positions = config.n_positions
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(
                1, 1, max_positions, max_positions),
            persistent=False,
        )
        self.register_buffer("masked_bias", torch.tensor(-1e4), persistent=False)
        self.embed_dim = config.n_embd
        self.num_heads = config.n_head
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim
        self.scale_attn_weights = config.scale_attn_weights
        self.is_cross_attention = is_cross_attention
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)

    def _attn(self, query, key, value, attention_mask=None, head_mask=None):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        if self.scale_attn_weights:
            attn_weights = attn_weights / torch.full(
                [], value.size(-1) ** 0.5, dtype=attn_weights.dtype, device=attn_weights.device)
        if not self.is_cross_attention:
            query_length, key_length = query.size(-2), key.size(-2)
            causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
            mask_value = torch.finfo(attn_weights.dtype).min
            # Need to be a tensor, otherwise we get error: `RuntimeError: expected scalar type float but found double`.
            mask_value = torch.full([], mask_value, dtype=attn_weights.dtype, device=attn_weights.device)
            attn_weights = torch.where(causal_mask, attn_weights.to(attn_weights.dtype), mask_value)
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = attn_weights.type(value.dtype)
        attn_weights = self.attn_dropout(attn_weights)
        if head_mask is not None:
            attn_weights = attn_weights * head_mask
        attn_output = torch.matmul(attn_weights, value)
        return attn_output, attn_weights

    def _split_heads(self, tensor, num_heads, attn_head_size):
        new_shape = tensor.size()[:-1] + (num_heads, attn_head_size)
        tensor = tensor.view(new_shape)
        return tensor.permute(0, 2, 1, 3)  # (batch, head, seq_length, head_features)

    def _merge_heads(self, tensor, num_heads, attn_head_size):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        new_shape = tensor.size()[:-2] + (num_heads * attn_head_size,)
        return tensor.view(new_shape)

    def forward(self, hidden_states, layer_past=None, attention_mask=None, head_mask=None, use_cache=False,
                output_attentions=False):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query = self._split_heads(query, self.num_heads, self.head_dim)
        key = self._split_heads(key, self.num_heads, self.head_dim)
        value = self._split_heads(value, self.num_heads, self.head_dim)
        if layer_past is not None:
            past_key, past_value = layer_past
            key = torch.cat((past_key, key), dim=-2)
            value = torch.cat((past_value, value), dim=-2)
        if use_cache is True:
            present = (key, value)
        else:
            present = None
        attn_output, attn_weights = self._attn(query, key, value, attention_mask, head_mask)
        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)
        attn_output = self.c_proj(attn_output)
        attn_output = self.resid_dropout(attn_output)
        outputs = (attn_output, present)
        if output_attentions:
            outputs += (attn_weights,)
        return outputs  # a, present, (attentions)


class GPT2MLP(nn.Module):
    def __init__(self, intermediate_size, config):
        super().__init__()
        embed_dim = config.n_embd
        self.c_fc = Conv1D(intermediate_size, embed_dim)
        self.c_proj = Conv1D(embed_dim, intermediate_size)
        self.act = NewGELUActivation()
        self.dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, hidden_states):
        hidden_states = self.c_fc(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.c_proj(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return hidden_states


class GPT2Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        hidden_size = config.n_embd
        inner_dim = config.n_inner if config.n_inner is not None else 4 * hidden_size
        self.ln_1 = nn.LayerNorm(hidden_size, eps=config.layer_norm_epsilon)
        self.attn = GPT2Attention(config)
        self.ln_2 = nn.LayerNorm(hidden_size, eps=config.layer_norm_epsilon)
        self.mlp = GPT2MLP(inner_dim, config)

    def forward(self, hidden_states, layer_past=None, attention_mask=None, head_mask=None, use_cache=False,
                output_attentions=False):
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        attn_outputs = self.attn(hidden_states, layer_past=layer_past, attention_mask=attention_mask,
                                 head_mask=head_mask, use_cache=use_cache, output_attentions=output_attentions)
        attn_output = attn_outputs[0]  # output_attn: a, present, (attentions)
        outputs = attn_outputs[1:]
        # residual connection
        hidden_states = attn_output + residual
        residual = hidden_states
        hidden_states = self.ln_2(hidden_states)
        feed_forward_hidden_states = self.mlp(hidden_states)
        # residual connection
        hidden_states = residual + feed_forward_hidden_states
        if use_cache:
            outputs = (hidden_states,) + outputs
        else:
            outputs = (hidden_states,) + outputs[1:]
        return outputs  # hidden_states, present, (attentions, cross_attentions)


def get_parameter_dtype(parameter: nn.Module) -> torch.dtype:
    last_dtype = None
    for t in parameter.parameters():
        last_dtype = t.dtype
        if t.is_floating_point():
            return t.dtype
    return last_dtype


class GPT2LMHeadModel(nn.Module):
    def __init__(self, config=GPT2Config):
        super().__init__()
        self.config = config
        self.embed_dim = config.n_embd
        self.wte = nn.Embedding(config.vocab_size, self.embed_dim)
        self.wpe = nn.Embedding(config.n_positions, self.embed_dim)
        self.drop = nn.Dropout(config.embd_pdrop)
        self.h = nn.ModuleList([GPT2Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(self.embed_dim, eps=config.layer_norm_epsilon)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight

    @property
    def dtype(self) -> torch.dtype:
        return get_parameter_dtype(self)

    def forward(self, input_ids=None, past_key_values=None, attention_mask=None, labels=None, use_cache=None,
                output_hidden_states=None, return_dict=None):
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        batch_size = input_ids.shape[0]
        device = input_ids.device

        if past_key_values is None:
            past_length = 0
            past_key_values = tuple([None] * len(self.h))
        else:
            past_length = past_key_values[0][0].size(-2)
        position_ids = torch.arange(past_length, input_shape[-1] + past_length, dtype=torch.long, device=device)
        position_ids = position_ids.unsqueeze(0)

        if attention_mask is not None:
            if batch_size <= 0:
                raise ValueError("batch_size has to be defined and > 0")
            attention_mask = attention_mask.view(batch_size, -1)
            attention_mask = attention_mask[:, None, None, :]
            attention_mask = attention_mask.to(dtype=self.dtype)  # fp16 compatibility
            attention_mask = (1.0 - attention_mask) * torch.finfo(self.dtype).min

        inputs_embeds = self.wte(input_ids)
        position_embeds = self.wpe(position_ids)
        hidden_states = inputs_embeds + position_embeds
        hidden_states = self.drop(hidden_states)
        output_shape = (-1,) + input_shape[1:] + (hidden_states.size(-1),)

        presents = () if use_cache else None
        all_hidden_states = () if output_hidden_states else None
        for i, (block, layer_past) in enumerate(zip(self.h, past_key_values)):
            if output_hidden_states:
                all_hidden_states = all_hidden_states + (hidden_states,)
            outputs = block(hidden_states, layer_past=layer_past, attention_mask=attention_mask,
                            use_cache=use_cache)
            hidden_states = outputs[0]
            if use_cache is True:
                presents = presents + (outputs[1],)

        hidden_states = self.ln_f(hidden_states)
        hidden_states = hidden_states.view(output_shape)
        if output_hidden_states:
            all_hidden_states = all_hidden_states + (hidden_states,)

        lm_logits = self.lm_head(hidden_states)
        loss = None
        if labels is not None:
            # Shift so that tokens < n predict n
            shift_logits = lm_logits[..., :-1, :].contiguous()
            shift_labels = labels[..., 1:].contiguous()
            loss_fct = nn.CrossEntropyLoss()
            loss = loss_fct(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))
        if not return_dict:
            output = (lm_logits, presents, all_hidden_states)
            return ((loss,) + output) if loss is not None else output
        return {"loss": loss, "logits": lm_logits, "past_key_values": presents, "hidden_states": all_hidden_states}


def _gpt2_decode_step() -> Inputs:
    """One generation step: a new token per sequence, the cache of 5 earlier ones, a padding mask."""
    cfg = GPT2Config
    head_dim = cfg.n_embd // cfg.n_head
    past = tuple((torch.randn(2, cfg.n_head, 5, head_dim), torch.randn(2, cfg.n_head, 5, head_dim))
                 for _ in range(cfg.n_layer))
    mask = torch.tensor([[1] * 6, [0, 0] + [1] * 4])
    return Inputs((torch.randint(0, cfg.vocab_size, (2, 1)),), {"past_key_values": past, "attention_mask": mask})


@case(inputs=_gpt2_decode_step, tags={"eval", "no_grad"})
class GPT2DecodeStep(GPT2LMHeadModel):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


def _gpt2_train_batch() -> Inputs:
    ids = torch.randint(0, GPT2Config.vocab_size, (2, 8))
    return Inputs((ids,), {"labels": ids.clone(), "use_cache": False, "output_hidden_states": True,
                           "return_dict": True})


@case(inputs=_gpt2_train_batch, tags={"train", "rng"})
class GPT2Train(GPT2LMHeadModel):
    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# LLaMA (Hugging Face transformers, the cached cos/sin rotary of 4.3x; gpt-fast's repeat_interleave)


class LlamaConfig:
    vocab_size = 64
    hidden_size = 32
    intermediate_size = 64
    num_hidden_layers = 2
    num_attention_heads = 4
    num_key_value_heads = 2
    max_position_embeddings = 32
    rms_norm_eps = 1e-6
    rope_theta = 10000.0
    attention_dropout = 0.0


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=2048, base=10000, device=None):
        super().__init__()
        self.dim = dim
        self.max_position_embeddings = max_position_embeddings
        self.base = base
        inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2).float().to(device) / self.dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self._set_cos_sin_cache(seq_len=max_position_embeddings, device=self.inv_freq.device,
                                dtype=torch.get_default_dtype())

    def _set_cos_sin_cache(self, seq_len, device, dtype):
        self.max_seq_len_cached = seq_len
        t = torch.arange(self.max_seq_len_cached, device=device, dtype=self.inv_freq.dtype)
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos().to(dtype), persistent=False)
        self.register_buffer("sin_cached", emb.sin().to(dtype), persistent=False)

    def forward(self, x, seq_len=None):
        if seq_len > self.max_seq_len_cached:
            self._set_cos_sin_cache(seq_len=seq_len, device=x.device, dtype=x.dtype)
        return (
            self.cos_cached[:seq_len].to(dtype=x.dtype),
            self.sin_cached[:seq_len].to(dtype=x.dtype),
        )


def rotate_half(x):
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, position_ids, unsqueeze_dim=1):
    cos = cos[position_ids].unsqueeze(unsqueeze_dim)
    sin = sin[position_ids].unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


class LlamaMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.intermediate_size = config.intermediate_size
        self.gate_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.up_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaAttention(nn.Module):
    def __init__(self, config, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.attention_dropout = config.attention_dropout
        self.hidden_size = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = self.hidden_size // self.num_heads
        self.num_key_value_heads = config.num_key_value_heads
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads
        self.max_position_embeddings = config.max_position_embeddings
        self.rope_theta = config.rope_theta
        self.is_causal = True

        if (self.head_dim * self.num_heads) != self.hidden_size:
            raise ValueError("hidden_size must be divisible by num_heads")
        self.q_proj = nn.Linear(self.hidden_size, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, self.hidden_size, bias=False)
        self.rotary_emb = LlamaRotaryEmbedding(self.head_dim, max_position_embeddings=self.max_position_embeddings,
                                               base=self.rope_theta)

    def forward(self, hidden_states, attention_mask=None, position_ids=None):
        bsz, q_len, _ = hidden_states.size()

        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)

        query_states = query_states.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = key_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        value_states = value_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)

        kv_seq_len = key_states.shape[-2]
        cos, sin = self.rotary_emb(value_states, seq_len=kv_seq_len)
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin, position_ids)

        key_states = key_states.repeat_interleave(self.num_key_value_groups, dim=1)
        value_states = value_states.repeat_interleave(self.num_key_value_groups, dim=1)

        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
        if attention_mask is not None:
            if attention_mask.size() != (bsz, 1, q_len, kv_seq_len):
                raise ValueError(f"Attention mask should be of size {(bsz, 1, q_len, kv_seq_len)}")
            attn_weights = attn_weights + attention_mask

        # upcast attention to fp32
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_weights = nn.functional.dropout(attn_weights, p=self.attention_dropout, training=self.training)
        attn_output = torch.matmul(attn_weights, value_states)

        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, q_len, self.hidden_size)
        return self.o_proj(attn_output)


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config, layer_idx: int):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.self_attn = LlamaAttention(config=config, layer_idx=layer_idx)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, hidden_states, attention_mask=None, position_ids=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states=hidden_states, attention_mask=attention_mask,
                                       position_ids=position_ids)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states
        return (hidden_states,)


class LlamaForCausalLM(nn.Module):
    def __init__(self, config=LlamaConfig):
        super().__init__()
        self.config = config
        self.padding_idx = 0
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, self.padding_idx)
        self.layers = nn.ModuleList([LlamaDecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        self.norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids, attention_mask=None, position_ids=None):
        batch_size, seq_length = input_ids.shape[:2]
        device = input_ids.device
        if position_ids is None:
            position_ids = torch.arange(0, seq_length, dtype=torch.long, device=device)
            position_ids = position_ids.unsqueeze(0)
        inputs_embeds = self.embed_tokens(input_ids)

        # 4d causal mask: min where masked, 0 where attended, padding folded in
        dtype = inputs_embeds.dtype
        min_dtype = torch.finfo(dtype).min
        causal_mask = torch.full((seq_length, seq_length), fill_value=min_dtype, dtype=dtype, device=device)
        causal_mask = torch.triu(causal_mask, diagonal=1)
        causal_mask = causal_mask[None, None, :, :].expand(batch_size, 1, -1, -1)
        if attention_mask is not None:
            causal_mask = causal_mask.clone()
            padding_mask = causal_mask.eq(0.0) * attention_mask[:, None, None, :].eq(0.0)
            causal_mask = causal_mask.masked_fill(padding_mask, min_dtype)

        hidden_states = inputs_embeds
        for decoder_layer in self.layers:
            layer_outputs = decoder_layer(hidden_states, attention_mask=causal_mask, position_ids=position_ids)
            hidden_states = layer_outputs[0]
        hidden_states = self.norm(hidden_states)
        logits = self.lm_head(hidden_states)
        logits = logits.float()
        return logits


@case(inputs=lambda: (torch.randint(1, 64, (2, 6)), torch.tensor([[1] * 6, [0] + [1] * 5])),
      tags={"eval", "no_grad"})
class LlamaEval(LlamaForCausalLM):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=lambda: Inputs((torch.randint(1, 64, (2, 6)),), {"position_ids": torch.tensor([[0, 1, 2, 3, 0, 1]])}),
      tags={"train"})
class LlamaTrain(LlamaForCausalLM):
    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# A training step of LLaMA under torch.autocast (mixed precision)


@case(inputs=lambda: torch.randint(1, 64, (2, 6)), tags={"train"})
class LlamaAutocastTrain(LlamaForCausalLM):
    """The forward as a mixed-precision training step runs it: under ``torch.autocast`` (bfloat16
    on CPU), the loss computed in float32 outside the region."""

    def __init__(self) -> None:
        super().__init__()
        self.train()

    def forward(self, input_ids):
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            logits = super().forward(input_ids)
        shift_logits = logits[..., :-1, :].contiguous().float()
        return F.cross_entropy(shift_logits.view(-1, shift_logits.size(-1)), input_ids[..., 1:].reshape(-1))


# ------------------------------------------------------------------------------------------------
# Whisper's text decoder (openai/whisper): a kv-cache dict keyed by modules, filled by forward hooks


class WhisperLayerNorm(nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.float()).type(x.dtype)


class WhisperLinear(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight.to(x.dtype), None if self.bias is None else self.bias.to(x.dtype))


SDPA_AVAILABLE = hasattr(F, "scaled_dot_product_attention")


class WhisperMultiHeadAttention(nn.Module):
    use_sdpa = False

    def __init__(self, n_state: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.query = WhisperLinear(n_state, n_state)
        self.key = WhisperLinear(n_state, n_state, bias=False)
        self.value = WhisperLinear(n_state, n_state)
        self.out = WhisperLinear(n_state, n_state)

    def forward(self, x, xa=None, mask=None, kv_cache=None):
        q = self.query(x)

        if kv_cache is None or xa is None or self.key not in kv_cache:
            # hooks, if installed (i.e. kv_cache is not None), will prepend the cached kv tensors;
            # otherwise, perform key/value projections for self- or cross-attention as usual.
            k = self.key(x if xa is None else xa)
            v = self.value(x if xa is None else xa)
        else:
            # for cross-attention, calculate keys and values once and reuse in subsequent calls.
            k = kv_cache[self.key]
            v = kv_cache[self.value]

        wv, qk = self.qkv_attention(q, k, v, mask)
        return self.out(wv), qk

    def qkv_attention(self, q, k, v, mask=None):
        n_batch, n_ctx, n_state = q.shape
        scale = (n_state // self.n_head) ** -0.25
        q = q.view(*q.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)
        k = k.view(*k.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)
        v = v.view(*v.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)

        if SDPA_AVAILABLE and WhisperMultiHeadAttention.use_sdpa:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=mask is not None and n_ctx > 1)
            out = a.permute(0, 2, 1, 3).flatten(start_dim=2)
            qk = None
        else:
            qk = (q * scale) @ (k * scale).transpose(-1, -2)
            if mask is not None:
                qk = qk + mask[:n_ctx, :n_ctx]
            qk = qk.float()

            w = F.softmax(qk, dim=-1).to(q.dtype)
            out = (w @ v).permute(0, 2, 1, 3).flatten(start_dim=2)
            qk = qk.detach()

        return out, qk


class WhisperResidualAttentionBlock(nn.Module):
    def __init__(self, n_state: int, n_head: int, cross_attention: bool = False):
        super().__init__()
        self.attn = WhisperMultiHeadAttention(n_state, n_head)
        self.attn_ln = WhisperLayerNorm(n_state)
        self.cross_attn = WhisperMultiHeadAttention(n_state, n_head) if cross_attention else None
        self.cross_attn_ln = WhisperLayerNorm(n_state) if cross_attention else None
        n_mlp = n_state * 4
        self.mlp = nn.Sequential(WhisperLinear(n_state, n_mlp), nn.GELU(), WhisperLinear(n_mlp, n_state))
        self.mlp_ln = WhisperLayerNorm(n_state)

    def forward(self, x, xa=None, mask=None, kv_cache=None):
        x = x + self.attn(self.attn_ln(x), mask=mask, kv_cache=kv_cache)[0]
        if self.cross_attn:
            x = x + self.cross_attn(self.cross_attn_ln(x), xa, kv_cache=kv_cache)[0]
        x = x + self.mlp(self.mlp_ln(x))
        return x


class WhisperTextDecoder(nn.Module):
    def __init__(self, n_vocab=40, n_ctx=16, n_state=32, n_head=4, n_layer=2):
        super().__init__()
        self.token_embedding = nn.Embedding(n_vocab, n_state)
        self.positional_embedding = nn.Parameter(torch.empty(n_ctx, n_state).normal_(std=0.1))
        self.blocks = nn.ModuleList(
            [WhisperResidualAttentionBlock(n_state, n_head, cross_attention=True) for _ in range(n_layer)])
        self.ln = WhisperLayerNorm(n_state)
        mask = torch.empty(n_ctx, n_ctx).fill_(-float("inf")).triu_(1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x, xa, kv_cache=None):
        offset = next(iter(kv_cache.values())).shape[1] if kv_cache else 0
        x = self.token_embedding(x) + self.positional_embedding[offset: offset + x.shape[-1]]
        x = x.to(xa.dtype)
        for block in self.blocks:
            x = block(x, xa, mask=self.mask, kv_cache=kv_cache)
        x = self.ln(x)
        logits = (x @ torch.transpose(self.token_embedding.weight.to(x.dtype), 0, 1)).float()
        return logits


class WhisperGreedyDecoder(nn.Module):
    """Whisper's decoding loop, cut to its core: hooks fill the kv cache on the prompt, then each step
    feeds the last token only; the cache is emptied when decoding ends (cleanup_caching)."""

    n_text_ctx = 16

    def __init__(self, steps=3):
        super().__init__()
        self.decoder = WhisperTextDecoder(n_ctx=self.n_text_ctx)
        self.steps = steps
        self.kv_cache, self.hooks = self.install_kv_cache_hooks()
        self.eval()

    def install_kv_cache_hooks(self, cache=None):
        cache = {**cache} if cache is not None else {}
        hooks = []

        def save_to_cache(module, _, output):
            if module not in cache or output.shape[1] > self.n_text_ctx:
                # save as-is, for the first token or cross attention
                cache[module] = output
            else:
                cache[module] = torch.cat([cache[module], output], dim=1).detach()
            return cache[module]

        def install_hooks(layer: nn.Module):
            if isinstance(layer, WhisperMultiHeadAttention):
                hooks.append(layer.key.register_forward_hook(save_to_cache))
                hooks.append(layer.value.register_forward_hook(save_to_cache))

        self.decoder.apply(install_hooks)
        return cache, hooks

    def forward(self, tokens, audio_features):
        initial_token_length = tokens.shape[-1]
        sum_logprobs = torch.zeros(tokens.shape[0])
        for i in range(self.steps):
            step_tokens = tokens[:, -1:] if tokens.shape[-1] > initial_token_length else tokens
            logits = self.decoder(step_tokens, audio_features, kv_cache=self.kv_cache)
            logits = logits[:, -1]
            logprobs = F.log_softmax(logits.float(), dim=-1)
            next_tokens = logits.argmax(dim=-1)
            current_logprobs = logprobs[torch.arange(logprobs.shape[0]), next_tokens]
            sum_logprobs += current_logprobs
            tokens = torch.cat([tokens, next_tokens[:, None]], dim=-1)
        cached = len(self.kv_cache)
        self.kv_cache.clear()
        return tokens, sum_logprobs, cached


@case(inputs=lambda: (torch.randint(0, 40, (2, 3)), torch.randn(2, 10, 32)), tags={"eval", "no_grad"})
class WhisperDecodeEval(WhisperGreedyDecoder):
    pass


# ------------------------------------------------------------------------------------------------
# T5 (Hugging Face transformers): relative position buckets, T5LayerNorm, position_bias passed on


class T5Config:
    vocab_size = 40
    d_model = 32
    d_kv = 8
    d_ff = 64
    num_layers = 2
    num_heads = 4
    relative_attention_num_buckets = 8
    relative_attention_max_distance = 20
    dropout_rate = 0.1
    layer_norm_epsilon = 1e-6
    is_decoder = False


class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        # convert into half-precision if necessary
        if self.weight.dtype in [torch.float16, torch.bfloat16]:
            hidden_states = hidden_states.to(self.weight.dtype)
        return self.weight * hidden_states


class T5DenseActDense(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wi = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.wo = nn.Linear(config.d_ff, config.d_model, bias=False)
        self.dropout = nn.Dropout(config.dropout_rate)
        self.act = nn.ReLU()

    def forward(self, hidden_states):
        hidden_states = self.wi(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.dropout(hidden_states)
        if (
            isinstance(self.wo.weight, torch.Tensor)
            and hidden_states.dtype != self.wo.weight.dtype
            and self.wo.weight.dtype != torch.int8
        ):
            hidden_states = hidden_states.to(self.wo.weight.dtype)
        hidden_states = self.wo(hidden_states)
        return hidden_states


class T5Attention(nn.Module):
    def __init__(self, config, has_relative_attention_bias=False):
        super().__init__()
        self.is_decoder = config.is_decoder
        self.has_relative_attention_bias = has_relative_attention_bias
        self.relative_attention_num_buckets = config.relative_attention_num_buckets
        self.relative_attention_max_distance = config.relative_attention_max_distance
        self.d_model = config.d_model
        self.key_value_proj_dim = config.d_kv
        self.n_heads = config.num_heads
        self.dropout = config.dropout_rate
        self.inner_dim = self.n_heads * self.key_value_proj_dim
        self.q = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.k = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.v = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.o = nn.Linear(self.inner_dim, self.d_model, bias=False)
        if self.has_relative_attention_bias:
            self.relative_attention_bias = nn.Embedding(self.relative_attention_num_buckets, self.n_heads)
        self.gradient_checkpointing = False

    @staticmethod
    def _relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
        relative_buckets = 0
        if bidirectional:
            num_buckets //= 2
            relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
            relative_position = torch.abs(relative_position)
        else:
            relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
        # now relative_position is in the range [0, inf)

        # half of the buckets are for exact increments in positions
        max_exact = num_buckets // 2
        is_small = relative_position < max_exact

        # The other half of the buckets are for logarithmically bigger bins in positions up to max_distance
        relative_position_if_large = max_exact + (
            torch.log(relative_position.float() / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).to(torch.long)
        relative_position_if_large = torch.min(
            relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
        )

        relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
        return relative_buckets

    def compute_bias(self, query_length, key_length, device=None):
        """Compute binned relative position bias"""
        if device is None:
            device = self.relative_attention_bias.weight.device
        context_position = torch.arange(query_length, dtype=torch.long, device=device)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long, device=device)[None, :]
        relative_position = memory_position - context_position  # shape (query_length, key_length)
        relative_position_bucket = self._relative_position_bucket(
            relative_position,  # shape (query_length, key_length)
            bidirectional=(not self.is_decoder),
            num_buckets=self.relative_attention_num_buckets,
            max_distance=self.relative_attention_max_distance,
        )
        values = self.relative_attention_bias(relative_position_bucket)  # shape (query_length, key_length, num_heads)
        values = values.permute([2, 0, 1]).unsqueeze(0)  # shape (1, num_heads, query_length, key_length)
        return values

    def forward(self, hidden_states, mask=None, position_bias=None, output_attentions=False):
        batch_size, seq_length = hidden_states.shape[:2]
        real_seq_length = seq_length
        key_length = real_seq_length

        def shape(states):
            """projection"""
            return states.view(batch_size, -1, self.n_heads, self.key_value_proj_dim).transpose(1, 2)

        def unshape(states):
            """reshape"""
            return states.transpose(1, 2).contiguous().view(batch_size, -1, self.inner_dim)

        query_states = shape(self.q(hidden_states))
        key_states = shape(self.k(hidden_states))
        value_states = shape(self.v(hidden_states))

        scores = torch.matmul(query_states, key_states.transpose(3, 2))

        if position_bias is None:
            if not self.has_relative_attention_bias:
                position_bias = torch.zeros(
                    (1, self.n_heads, real_seq_length, key_length), device=scores.device, dtype=scores.dtype)
                if self.gradient_checkpointing and self.training:
                    position_bias.requires_grad = True
            else:
                position_bias = self.compute_bias(real_seq_length, key_length, device=scores.device)
            if mask is not None:
                position_bias = position_bias + mask  # (batch_size, n_heads, seq_length, key_length)

        position_bias_masked = position_bias
        scores += position_bias_masked
        attn_weights = nn.functional.softmax(scores.float(), dim=-1).type_as(scores)
        attn_weights = nn.functional.dropout(attn_weights, p=self.dropout, training=self.training)
        attn_output = unshape(torch.matmul(attn_weights, value_states))
        attn_output = self.o(attn_output)

        outputs = (attn_output,) + (None,) + (position_bias,)
        if output_attentions:
            outputs = outputs + (attn_weights,)
        return outputs


class T5Block(nn.Module):
    def __init__(self, config, has_relative_attention_bias=False):
        super().__init__()
        self.SelfAttention = T5Attention(config, has_relative_attention_bias=has_relative_attention_bias)
        self.attn_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.ff = T5DenseActDense(config)
        self.ff_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.dropout = nn.Dropout(config.dropout_rate)

    def forward(self, hidden_states, attention_mask=None, position_bias=None):
        normed = self.attn_norm(hidden_states)
        attention_output = self.SelfAttention(normed, mask=attention_mask, position_bias=position_bias)
        hidden_states = hidden_states + self.dropout(attention_output[0])
        attention_outputs = attention_output[1:]  # Keep self-attention outputs and relative position weights

        # clamp inf values to enable fp16 training
        if hidden_states.dtype == torch.float16:
            clamp_value = torch.where(
                torch.isinf(hidden_states).any(),
                torch.finfo(hidden_states.dtype).max - 1000,
                torch.finfo(hidden_states.dtype).max,
            )
            hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)

        hidden_states = hidden_states + self.dropout(self.ff(self.ff_norm(hidden_states)))
        return (hidden_states,) + attention_outputs


class T5EncoderModel(nn.Module):
    def __init__(self, config=T5Config):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.d_model)
        self.block = nn.ModuleList([T5Block(config, has_relative_attention_bias=bool(i == 0))
                                    for i in range(config.num_layers)])
        self.final_layer_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.dropout = nn.Dropout(config.dropout_rate)

    def get_extended_attention_mask(self, attention_mask, input_shape, dtype=None):
        if dtype is None:
            dtype = self.embed_tokens.weight.dtype
        if attention_mask.dim() == 3:
            extended_attention_mask = attention_mask[:, None, :, :]
        elif attention_mask.dim() == 2:
            extended_attention_mask = attention_mask[:, None, None, :]
        else:
            raise ValueError(f"Wrong shape for input_ids (shape {input_shape}) or attention_mask")
        extended_attention_mask = extended_attention_mask.to(dtype=dtype)  # fp16 compatibility
        extended_attention_mask = (1.0 - extended_attention_mask) * torch.finfo(dtype).min
        return extended_attention_mask

    def forward(self, input_ids, attention_mask=None, output_hidden_states=False):
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        inputs_embeds = self.embed_tokens(input_ids)
        batch_size, seq_length = input_shape
        if attention_mask is None:
            attention_mask = torch.ones(batch_size, seq_length, device=inputs_embeds.device)
        extended_attention_mask = self.get_extended_attention_mask(attention_mask, input_shape)

        all_hidden_states = () if output_hidden_states else None
        position_bias = None
        hidden_states = self.dropout(inputs_embeds)
        for i, layer_module in enumerate(self.block):
            if output_hidden_states:
                all_hidden_states = all_hidden_states + (hidden_states,)
            layer_outputs = layer_module(hidden_states, attention_mask=extended_attention_mask,
                                         position_bias=position_bias)
            hidden_states = layer_outputs[0]
            # We share the position biases between the layers - the first layer store them
            position_bias = layer_outputs[2]

        hidden_states = self.final_layer_norm(hidden_states)
        hidden_states = self.dropout(hidden_states)
        if output_hidden_states:
            all_hidden_states = all_hidden_states + (hidden_states,)
        return tuple(v for v in [hidden_states, all_hidden_states] if v is not None)


@case(inputs=lambda: (torch.randint(0, 40, (2, 9)), torch.tensor([[1] * 9, [1] * 6 + [0] * 3])),
      tags={"eval", "no_grad"})
class T5EncoderEval(T5EncoderModel):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=lambda: Inputs((torch.randint(0, 40, (2, 9)),), {"output_hidden_states": True}), tags={"train", "rng"})
class T5EncoderTrain(T5EncoderModel):
    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# A top-2 mixture of experts with dense dispatch (GShard / fairseq-moe style): topk, one_hot,
# cumsum positions in each expert's capacity, einsum dispatch and combine, an auxiliary loss


class Top2Gate(nn.Module):
    def __init__(self, model_dim, num_experts, capacity_factor=2.0):
        super().__init__()
        self.wg = nn.Linear(model_dim, num_experts, bias=False)
        self.capacity_factor = capacity_factor

    def forward(self, input):
        logits = self.wg(input)
        gates = F.softmax(logits, dim=1)
        num_tokens, num_experts = gates.shape
        capacity = 2 * math.ceil(num_tokens / num_experts * self.capacity_factor)

        indices1_s = torch.argmax(gates, dim=1, keepdim=True)
        mask1 = F.one_hot(indices1_s.squeeze(1), num_classes=num_experts)
        logits_except1 = logits.masked_fill(mask1.bool(), float("-inf"))
        indices2_s = torch.argmax(logits_except1, dim=1, keepdim=True)
        mask2 = F.one_hot(indices2_s.squeeze(1), num_classes=num_experts)

        locations1 = torch.cumsum(mask1, dim=0) - 1
        locations2 = torch.cumsum(mask2, dim=0) - 1
        locations2 += torch.sum(mask1, dim=0, keepdim=True)

        me = torch.mean(gates, dim=0)
        ce = torch.mean(mask1.to(gates.dtype), dim=0)
        l_aux = torch.mean(me * ce) * num_experts * num_experts

        mask1 = mask1 * torch.lt(locations1, capacity)
        mask2 = mask2 * torch.lt(locations2, capacity)
        locations1_s = torch.sum(locations1 * mask1, dim=1)
        locations2_s = torch.sum(locations2 * mask2, dim=1)

        gates1_s = (gates * mask1).sum(dim=1)
        gates2_s = (gates * mask2).sum(dim=1)
        denom_s = gates1_s + gates2_s
        denom_s = torch.clamp(denom_s, min=torch.finfo(denom_s.dtype).eps)
        gates1_s /= denom_s
        gates2_s /= denom_s

        gates1 = gates1_s.unsqueeze(-1) * mask1.to(gates1_s.dtype)
        gates2 = gates2_s.unsqueeze(-1) * mask2.to(gates2_s.dtype)
        locations1_sc = F.one_hot(locations1_s, num_classes=capacity)
        locations2_sc = F.one_hot(locations2_s, num_classes=capacity)
        combine1_sec = torch.bmm(gates1.unsqueeze(-1), locations1_sc.to(gates1.dtype).unsqueeze(1))
        combine2_sec = torch.bmm(gates2.unsqueeze(-1), locations2_sc.to(gates2.dtype).unsqueeze(1))
        combine_weights = combine1_sec + combine2_sec
        dispatch_mask = combine_weights.bool()
        return l_aux, combine_weights, dispatch_mask


class MOELayer(nn.Module):
    def __init__(self, model_dim=16, num_experts=4):
        super().__init__()
        self.gate = Top2Gate(model_dim, num_experts)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(model_dim, 32), nn.ReLU(), nn.Linear(32, model_dim)) for _ in range(num_experts))
        self.num_local_experts = num_experts

    def forward(self, *input, **kwargs):
        assert len(input) == 1, "only single input Tensor supported"
        input = input[0]
        assert len(input.shape) == 3, "input Tensor must have dimensions: (s)equence, (t)oken, (m)odel"
        d_model = input.shape[2]
        reshaped_input = input.reshape(-1, d_model)
        self.l_aux, combine_weights, dispatch_mask = self.gate(reshaped_input)
        dispatched_input = torch.einsum("sec,sm->ecm", dispatch_mask.to(input.dtype), reshaped_input)
        chunks = dispatched_input.chunk(self.num_local_experts, dim=0)
        expert_outputs = []
        for chunk, expert in zip(chunks, self.experts):
            expert_outputs += [expert(chunk)]
        expert_output = torch.cat(expert_outputs, dim=0)
        combined_output = torch.einsum("sec,ecm->sm", combine_weights, expert_output)
        return combined_output.reshape(input.shape)


@case(inputs=lambda: torch.randn(2, 6, 16), tags={"eval", "no_grad"})
class MoEEval(MOELayer):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=lambda: torch.randn(2, 6, 16), tags={"train"})
class MoETrain(MOELayer):
    """The auxiliary load-balancing loss stored on the module (``self.l_aux``), returned with the output."""

    def __init__(self) -> None:
        super().__init__()
        self.train()

    def forward(self, x):
        out = super().forward(x)
        return out, self.l_aux


# ------------------------------------------------------------------------------------------------
# Megatron-LM's MLP with its TorchScript-fused bias GeLU


@torch.jit.script
def bias_gelu(bias, y):
    x = bias + y
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


class ParallelMLPStyle(nn.Module):
    """Megatron's ParallelMLP without the parallelism: the first linear skips its bias
    (``skip_bias_add``) and returns it, the fused ``@torch.jit.script`` bias-GeLU adds it."""

    def __init__(self, hidden=16, ffn=64):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(hidden, ffn, bias=False)
        self.dense_h_to_4h_bias = nn.Parameter(torch.randn(ffn) * 0.1)
        self.dense_4h_to_h = nn.Linear(ffn, hidden)
        self.bias_gelu_fusion = True

    def forward(self, hidden_states):
        intermediate_parallel, bias_parallel = self.dense_h_to_4h(hidden_states), self.dense_h_to_4h_bias
        if self.bias_gelu_fusion:
            intermediate_parallel = bias_gelu(bias_parallel, intermediate_parallel)
        else:
            intermediate_parallel = F.gelu(intermediate_parallel + bias_parallel)
        return self.dense_4h_to_h(intermediate_parallel)


@case(inputs=lambda: torch.randn(2, 8, 16), tags={"train"})
class MegatronMLPTrain(ParallelMLPStyle):
    def __init__(self) -> None:
        super().__init__()
        self.train()
