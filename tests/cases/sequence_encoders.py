"""Corpus: encoders and step-by-step decoders as libraries and papers write them (small sizes,
CPU, written here).

Each model is run in eval mode under ``torch.no_grad()`` (tag ``"no_grad"``) and, where it makes
sense, in training mode (dropout and drop-path draw random numbers: tag ``"rng"`` has the harness
start every call from the case's seed).

- ``BertStyle``: an encoder as Hugging Face models write one: optional attention mask turned into an
  additive mask with ``torch.finfo(dtype).min``, ``padding_idx`` embeddings, a position ``Parameter``
  sliced to the input, and a ``dataclass`` output (``return_dict``) or a tuple;
- ``Seq2SeqDecoder``: an attention decoder unrolled over the target (teacher forcing in training,
  greedy ``argmax`` feedback in eval), outputs collected in a list and ``torch.cat``-ed;
- ``TorchTransformerEncoder``: torch's own ``nn.TransformerEncoder`` (its eval fast-path checks and
  ``_transformer_encoder_layer_fwd``, ``F._canonical_mask`` of a padding mask; pre-norm GELU training);
- ``KwargsEncoder``: a Hugging Face-style encoder passing ``*args`` / ``**kwargs`` down its layers,
  ``dict(kwargs, output_attentions=...)``, activations looked up by name in an ``ACT2FN`` table;
- ``ModelOutputTrain``: Hugging Face's ``ModelOutput`` as written there (an ``OrderedDict`` subclass
  and dataclass whose ``__post_init__`` walks ``dataclasses.fields``, ``__setitem__`` and
  ``__setattr__`` overridden).
"""

from __future__ import annotations

import collections
import collections.abc
import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from pyframe.debug.cases import Inputs, case
from tests.cases.language_models import NewGELUActivation

# ------------------------------------------------------------------------------------------------
# A BERT-style encoder as Hugging Face models write one

@dataclasses.dataclass
class EncoderOutput:
    logits: torch.Tensor
    hidden_states: torch.Tensor | None = None


class BertStyle(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(30, 16, padding_idx=0)
        self.position = nn.Parameter(torch.randn(1, 8, 16) * 0.02)
        self.query, self.key, self.value = nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16, eps=1e-12)
        self.classifier = nn.Linear(16, 3)

    def forward(self, input_ids, attention_mask=None, return_dict=True):
        x = self.embeddings(input_ids) + self.position[:, : input_ids.shape[1]]
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        extended = attention_mask[:, None, None, :].to(dtype=x.dtype)
        extended = (1.0 - extended) * torch.finfo(x.dtype).min
        q, k, v = self.query(x), self.key(x), self.value(x)
        scores = torch.matmul(q.unsqueeze(1), k.unsqueeze(1).transpose(-1, -2)) / math.sqrt(q.shape[-1])
        probs = nn.functional.softmax(scores + extended, dim=-1)
        hidden = self.norm(torch.matmul(probs, v.unsqueeze(1)).squeeze(1) + x)
        logits = self.classifier(hidden[:, 0])
        if not return_dict:
            return logits, hidden
        return EncoderOutput(logits=logits, hidden_states=hidden)


@case(inputs=lambda: (torch.randint(1, 30, (2, 8)), torch.tensor([[1] * 8, [1] * 5 + [0] * 3])), tags={"eval"})
class BertStyleMasked(BertStyle):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=lambda: Inputs((torch.randint(1, 30, (2, 8)),), {"return_dict": False}), tags={"train"})
class BertStyleTuple(BertStyle):
    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# A seq2seq attention decoder unrolled step by step (Bahdanau-style, no LSTM: a GRU-like update by hand)


class AttnDecoder(nn.Module):
    def __init__(self, vocab=20, hidden=24, max_length=5, sos_token=1, dropout_p=0.1):
        super().__init__()
        self.hidden_size = hidden
        self.max_length = max_length
        self.sos_token = sos_token
        self.embedding = nn.Embedding(vocab, hidden)
        self.Wa = nn.Linear(hidden, hidden)
        self.Ua = nn.Linear(hidden, hidden)
        self.Va = nn.Linear(hidden, 1)
        self.gates = nn.Linear(3 * hidden, 2 * hidden)
        self.candidate = nn.Linear(3 * hidden, hidden)
        self.out = nn.Linear(hidden, vocab)
        self.dropout = nn.Dropout(dropout_p)

    def attention(self, query, keys):
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
        scores = scores.squeeze(2).unsqueeze(1)
        weights = F.softmax(scores, dim=-1)
        context = torch.bmm(weights, keys)
        return context, weights

    def forward_step(self, input, hidden, encoder_outputs):
        embedded = self.dropout(self.embedding(input))
        query = hidden.permute(1, 0, 2)
        context, attn_weights = self.attention(query, encoder_outputs)
        x = torch.cat((embedded, context), dim=2)
        h = hidden.permute(1, 0, 2)
        z, r = torch.sigmoid(self.gates(torch.cat((x, h), dim=2))).chunk(2, dim=-1)
        n = torch.tanh(self.candidate(torch.cat((x, r * h), dim=2)))
        h = (1 - z) * n + z * h
        output = self.out(h)
        return output, h.permute(1, 0, 2), attn_weights

    def forward(self, encoder_outputs, encoder_hidden, target_tensor=None):
        batch_size = encoder_outputs.size(0)
        decoder_input = torch.empty(batch_size, 1, dtype=torch.long, device=encoder_outputs.device).fill_(
            self.sos_token)
        decoder_hidden = encoder_hidden
        decoder_outputs = []
        attentions = []

        for i in range(self.max_length):
            decoder_output, decoder_hidden, attn_weights = self.forward_step(
                decoder_input, decoder_hidden, encoder_outputs)
            decoder_outputs.append(decoder_output)
            attentions.append(attn_weights)

            if target_tensor is not None:
                # Teacher forcing: Feed the target as the next input
                decoder_input = target_tensor[:, i].unsqueeze(1)  # Teacher forcing
            else:
                # Without teacher forcing: use its own predictions as the next input
                _, topi = decoder_output.topk(1)
                decoder_input = topi.squeeze(-1).detach()  # detach from history as input

        decoder_outputs = torch.cat(decoder_outputs, dim=1)
        decoder_outputs = F.log_softmax(decoder_outputs, dim=-1)
        attentions = torch.cat(attentions, dim=1)
        return decoder_outputs, decoder_hidden, attentions


@case(inputs=lambda: (torch.randn(2, 7, 24), torch.randn(1, 2, 24)), tags={"eval", "no_grad"})
class Seq2SeqGreedyDecode(AttnDecoder):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=lambda: (torch.randn(2, 7, 24), torch.randn(1, 2, 24), torch.randint(0, 20, (2, 5))),
      tags={"train", "rng"})
class Seq2SeqTeacherForcing(AttnDecoder):
    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# torch's own nn.TransformerEncoder (its eval fast path checks, its training path)


class TorchTransformerEncoder(nn.Module):
    def __init__(self, d_model=32, nhead=4, norm_first=False, activation="relu", num_layers=2):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=64, dropout=0.1, activation=activation,
                                           batch_first=True, norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, num_layers=num_layers, enable_nested_tensor=False)
        self.embed = nn.Embedding(50, d_model)

    def forward(self, tokens, padding_mask=None):
        x = self.embed(tokens) * math.sqrt(self.embed.embedding_dim)
        return self.encoder(x, src_key_padding_mask=padding_mask)


def _padded_tokens() -> tuple:
    return torch.randint(1, 50, (2, 7)), torch.tensor([[False] * 7, [False] * 5 + [True] * 2])


@case(inputs=_padded_tokens, tags={"eval", "no_grad"})
class TorchTransformerEncoderEval(TorchTransformerEncoder):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=_padded_tokens, tags={"train", "rng"})
class TorchTransformerEncoderTrain(TorchTransformerEncoder):
    """Pre-norm with GELU (``activation="gelu"``, a string turned into ``F.gelu`` at init)."""

    def __init__(self) -> None:
        super().__init__(norm_first=True, activation="gelu")
        self.train()


# ------------------------------------------------------------------------------------------------
# A Hugging Face-style encoder layer passing **kwargs down, activations chosen by name


ACT2FN = {"gelu": nn.GELU, "relu": nn.ReLU, "silu": nn.SiLU, "gelu_new": NewGELUActivation}


class KwargsSelfAttention(nn.Module):
    def __init__(self, hidden=32, heads=4):
        super().__init__()
        self.num_attention_heads = heads
        self.attention_head_size = hidden // heads
        self.all_head_size = hidden
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(new_x_shape)
        return x.permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask=None, head_mask=None, output_attentions=False, **kwargs):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        if head_mask is not None:
            attention_probs = attention_probs * head_mask
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(new_context_layer_shape)
        outputs = (context_layer, attention_probs) if output_attentions else (context_layer,)
        return outputs


class KwargsLayer(nn.Module):
    def __init__(self, hidden=32, hidden_act="gelu_new"):
        super().__init__()
        self.attention = KwargsSelfAttention(hidden)
        self.intermediate = nn.Linear(hidden, 2 * hidden)
        act = ACT2FN[hidden_act]
        self.intermediate_act_fn = act() if isinstance(act, type) else act
        self.output = nn.Linear(2 * hidden, hidden)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, hidden_states, *args, **kwargs):
        self_attention_outputs = self.attention(hidden_states, *args, **kwargs)
        attention_output = self_attention_outputs[0]
        outputs = self_attention_outputs[1:]  # add self attentions if we output attention weights
        layer_output = self.norm(self.output(self.intermediate_act_fn(self.intermediate(attention_output)))
                                 + attention_output)
        return (layer_output,) + outputs


class KwargsEncoder(nn.Module):
    def __init__(self, num_layers=2, **config):
        super().__init__()
        self.layer = nn.ModuleList([KwargsLayer(**config) for _ in range(num_layers)])

    def forward(self, hidden_states, attention_mask=None, output_attentions=False, **kwargs):
        all_self_attentions = () if output_attentions else None
        layer_kwargs = dict(kwargs, output_attentions=output_attentions)
        for i, layer_module in enumerate(self.layer):
            layer_outputs = layer_module(hidden_states, attention_mask, **layer_kwargs)
            hidden_states = layer_outputs[0]
            if output_attentions:
                all_self_attentions = all_self_attentions + (layer_outputs[1],)
        return tuple(v for v in [hidden_states, all_self_attentions] if v is not None)


@case(inputs=lambda: Inputs((torch.randn(2, 5, 32),), {"attention_mask": torch.zeros(2, 1, 1, 5),
                                                      "output_attentions": True,
                                                      "head_mask": torch.ones(1, 4, 1, 1)}),
      tags={"eval", "no_grad"})
class KwargsEncoderEval(KwargsEncoder):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


# ------------------------------------------------------------------------------------------------
# Hugging Face's ModelOutput (an OrderedDict subclass, a dataclass, __post_init__ with fields())


class ModelOutput(collections.OrderedDict):
    def __post_init__(self):
        class_fields = dataclasses.fields(self)
        if not len(class_fields):
            raise ValueError(f"{self.__class__.__name__} has no fields.")
        if not all(field.default is None for field in class_fields[1:]):
            raise ValueError(f"{self.__class__.__name__} should not have more than one required field.")
        first_field = getattr(self, class_fields[0].name)
        other_fields_are_none = all(getattr(self, field.name) is None for field in class_fields[1:])
        if other_fields_are_none and isinstance(first_field, dict):
            for key, value in first_field.items():
                self[key] = value
        else:
            for field in class_fields:
                v = getattr(self, field.name)
                if v is not None:
                    self[field.name] = v

    def __getitem__(self, k):
        if isinstance(k, str):
            inner_dict = dict(self.items())
            return inner_dict[k]
        else:
            return self.to_tuple()[k]

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class SequenceClassifierOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor = None
    hidden_states: tuple | None = None
    attentions: tuple | None = None


class ModelOutputClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = KwargsEncoder()
        self.classifier = nn.Linear(32, 3)

    def forward(self, hidden_states, labels=None, return_dict=True):
        outputs = self.encoder(hidden_states, output_attentions=True)
        pooled = outputs[0][:, 0]
        logits = self.classifier(pooled)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, 3), labels.view(-1))
        if not return_dict:
            output = (logits,) + outputs[1:]
            return ((loss,) + output) if loss is not None else output
        return SequenceClassifierOutput(loss=loss, logits=logits, attentions=outputs[1])


@case(inputs=lambda: (torch.randn(2, 5, 32), torch.tensor([0, 2])), tags={"train"})
class ModelOutputTrain(ModelOutputClassifier):
    def __init__(self) -> None:
        super().__init__()
        self.train()
