"""Corpus: instances of dict subclasses, Hugging Face's `ModelOutput` above all.

`ModelOutput` below is a stand-in written for this corpus, with the behaviour of transformers' class:
an OrderedDict subclass whose subclasses are dataclasses; `__post_init__` copies the fields that are
not None into the dict (or, when only the first field is set and it is a dict of str keys, its
items); `__getitem__` takes a key or an index into `to_tuple()`; `__setitem__` and `__setattr__`
keep an item and the attribute of the same name in sync through `super()`; the mutating methods
that would break that sync raise. Model code builds one in its forward, reads it by attribute, key
and index, hands it to the next layer and returns it; all of it is one graph in torch._dynamo.
"""

import collections
import dataclasses
import typing

import torch

from pyframe.debug.cases import case


class ModelOutput(collections.OrderedDict):
    """A model's outputs: both a dataclass (`out.logits`) and an ordered dict of the fields that
    are set (`out["logits"]`, `out[0]`, `out.keys()`)."""

    def __post_init__(self):
        fields = dataclasses.fields(self)
        first = getattr(self, fields[0].name)
        others_unset = all(getattr(self, field.name) is None for field in fields[1:])
        if others_unset and isinstance(first, dict) and all(isinstance(k, str) for k in first):
            for key, value in first.items():  # Out({"logits": t}): the dict's items are the fields
                setattr(self, key, value)
                if value is not None:
                    self[key] = value
            return
        for field in fields:
            value = getattr(self, field.name)
            if value is not None:
                self[field.name] = value

    def _refuse(self, method):
        raise RuntimeError(f"cannot use {method} on a {type(self).__name__} instance")

    def __delitem__(self, key):
        self._refuse("__delitem__")

    def setdefault(self, *args, **kwargs):
        self._refuse("setdefault")

    def pop(self, *args, **kwargs):
        self._refuse("pop")

    def update(self, *args, **kwargs):
        self._refuse("update")

    def __getitem__(self, key):
        if isinstance(key, str):
            return dict(self.items())[key]
        return self.to_tuple()[key]

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)  # (not self[name] = value: that would set the attribute again)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class ClassifierOutput(ModelOutput):
    logits: typing.Optional[torch.Tensor] = None
    hidden_states: typing.Optional[torch.Tensor] = None
    attentions: typing.Optional[torch.Tensor] = None


@dataclasses.dataclass
class LayerOutput(ModelOutput):
    hidden_states: typing.Optional[torch.Tensor] = None
    attention_probs: typing.Optional[torch.Tensor] = None


@dataclasses.dataclass
class EncoderOutput(ModelOutput):
    last_hidden_state: typing.Optional[torch.Tensor] = None
    hidden_states: typing.Optional[tuple] = None
    attentions: typing.Optional[tuple] = None


def _classifier_output():
    x = torch.randn(4)
    return ClassifierOutput(logits=x, hidden_states=x * 2)


@case(inputs=lambda: torch.randn(4))
def model_output_built_and_read(x):
    """Made in the frame, read by attribute, key, index, len, `in`, items(), to_tuple()."""
    out = ClassifierOutput(logits=x.sin(), hidden_states=None)
    y = out.logits + out["logits"] * out[0] + len(out)
    if "logits" in out and "hidden_states" not in out:
        y = y * 2
    for key, value in out.items():
        y = y + value if key == "logits" else y
    return y, out.to_tuple(), list(out.keys())


@case(inputs=lambda: torch.randn(4))
def model_output_returned(x):
    """Returned: rebuilt as the real class, its items and its attributes (None ones too)."""
    return ClassifierOutput(logits=x * 2, hidden_states=x + 1)


@case(inputs=lambda: torch.randn(4))
def model_output_from_a_dict(x):
    """Only the first field is given, a dict: its items become the fields (setattr, then self[k])."""
    out = ClassifierOutput({"logits": x.cos(), "attentions": x.relu()})
    return out, out[1] - out.attentions


@case(inputs=lambda: (_classifier_output(), torch.randn(4)))
def model_output_argument(out, x):
    """Made outside: read by attribute, key and index (its items from its storage, guarded)."""
    return out.logits * x + out["hidden_states"] + out[1] + len(out), tuple(out.values())


@case(inputs=lambda: (_classifier_output(), torch.randn(4)))
def model_output_argument_mutated(out, x):
    """Made outside and mutated: new items (and attributes), a field's and a key of its own, an
    attribute set over an item; all are replayed after the graph, and the caller sees the object
    changed."""
    out["attentions"] = x * 3
    out["extra"] = x - 1
    out.logits = out.logits + 1
    return out, out.to_tuple()[-1]


class ClassifierHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = torch.nn.Linear(8, 8)
        self.out_proj = torch.nn.Linear(8, 3)

    def forward(self, features):
        hidden = torch.tanh(self.dense(features))
        return ClassifierOutput(logits=self.out_proj(hidden), hidden_states=hidden)


@case(inputs=lambda: torch.randn(2, 8), tags={"nn"})
class ModuleReturningModelOutput(torch.nn.Module):
    """An nn.Module whose forward returns a ModelOutput built from a submodule's one."""

    def __init__(self):
        super().__init__()
        self.head = ClassifierHead()

    def forward(self, x):
        out = self.head(x)
        return ClassifierOutput(logits=out.logits.softmax(-1), hidden_states=out["hidden_states"])


class EncoderLayer(torch.nn.Module):
    """A BERT-like layer: single-head self-attention and a feed-forward block, post-norm."""

    def __init__(self, dim=8):
        super().__init__()
        self.query = torch.nn.Linear(dim, dim)
        self.key = torch.nn.Linear(dim, dim)
        self.value = torch.nn.Linear(dim, dim)
        self.attn_norm = torch.nn.LayerNorm(dim)
        self.ffn = torch.nn.Sequential(torch.nn.Linear(dim, 2 * dim), torch.nn.GELU(), torch.nn.Linear(2 * dim, dim))
        self.ffn_norm = torch.nn.LayerNorm(dim)

    def forward(self, hidden_states, attention_mask=None):
        q, k, v = self.query(hidden_states), self.key(hidden_states), self.value(hidden_states)
        scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
        if attention_mask is not None:
            scores = scores + attention_mask
        probs = scores.softmax(-1)
        hidden_states = self.attn_norm(hidden_states + probs @ v)
        hidden_states = self.ffn_norm(hidden_states + self.ffn(hidden_states))
        return LayerOutput(hidden_states=hidden_states, attention_probs=probs)


@case(inputs=lambda: (torch.randn(2, 5, 8), torch.zeros(2, 1, 5)), tags={"nn"})
class BertLikeEncoder(torch.nn.Module):
    """Each layer returns a ModelOutput that the next layer consumes; the encoder collects every
    hidden state and attention map into its own ModelOutput."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(EncoderLayer() for _ in range(3))

    def forward(self, hidden_states, attention_mask):
        all_hidden, all_attentions = (hidden_states,), ()
        for layer in self.layers:
            layer_out = layer(hidden_states, attention_mask)
            hidden_states = layer_out[0]
            all_hidden = all_hidden + (hidden_states,)
            all_attentions = all_attentions + (layer_out.attention_probs,)
        return EncoderOutput(last_hidden_state=hidden_states, hidden_states=all_hidden, attentions=all_attentions)


class Bag(dict):
    """A plain dict subclass with a method of its own."""

    def total(self):
        return sum(self.values())


@case(inputs=lambda: torch.randn(4))
def dict_subclass_with_a_method(x):
    bag = Bag(a=x, b=x * 2)
    bag["c"] = x + 1
    bag.update({"d": x.abs()})
    return bag.total(), bag, dict(bag), {**bag}


@case(inputs=lambda: (Bag(w=torch.randn(4), n=2), torch.randn(4)))
def dict_subclass_argument_mutated(bag, x):
    """Made outside: its items read, one added, one removed (replayed after the graph)."""
    y = bag["w"] * bag.get("n", 1) + x
    bag["y"] = y
    if "n" in bag:
        del bag["n"]
    return bag.total(), bag


class DoublingDict(collections.OrderedDict):
    """An OrderedDict subclass whose __getitem__ goes through super()."""

    def __getitem__(self, key):
        return super().__getitem__(key) * 2


@case(inputs=lambda: torch.randn(4))
def ordered_dict_subclass_getitem_super(x):
    d = DoublingDict()
    d["a"] = x.cos()
    d["b"] = x.sin()
    d.move_to_end("a")
    return d["a"] + d.get("b"), d, list(d)


class Counts(dict):
    """Missing keys count as zero (dict.__getitem__ asks __missing__)."""

    def __missing__(self, key):
        return 0


class Config(dict):
    """Attribute access to the items of a dict."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


@case(inputs=lambda: torch.randn(4))
def dict_subclass_missing_and_getattr(x):
    counts = Counts(seen=2)
    config = Config(scale=3.0, shift=x.mean())
    y = x * (counts["seen"] + counts["unseen"]) * config.scale + config.shift
    return y, getattr(config, "bias", 0.5), hasattr(config, "scale")
