"""The fuzzer's program model: the types the generator gives every value it writes, the features a
program can use, and the records of a generated program (``Program``), its helpers and its scopes.
"""
from __future__ import annotations

import dataclasses
from typing import TypeVar, Union


@dataclasses.dataclass(frozen=True)
class TensorT:
    shape: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class IntT:
    pass


@dataclasses.dataclass(frozen=True)
class FloatT:
    pass


@dataclasses.dataclass(frozen=True)
class SeqT:
    kind: str  # "list" or "tuple"
    items: tuple["VType", ...]


@dataclasses.dataclass(frozen=True)
class DictT:
    """A dict passed in with fixed string keys (``d0``): its entries are read and written by the
    program as ``d0["k"]``, like variables of the scope, and compared after the call."""

    items: tuple[tuple[str, "VType"], ...]


VType = Union[TensorT, IntT, FloatT, SeqT, DictT]
T = TypeVar("T")
INT, FLOAT = IntT(), FloatT()

#: Every feature the generator can use; Program.features says which ones a program uses.
FEATURES = frozenset({
    "tensor_if", "python_if", "ternary", "and_or", "for_range", "for_list", "helper_call",
    "nested_helper_call", "inplace", "aug_assign", "log_append", "matmul", "reduction",
    "dim_reduction", "list", "tuple", "index", "unpack", "list_append", "item", "early_return",
    "alias", "stack", "transpose", "unary", "division", "keyword_call", "expr_condition", "residual",
    "scalar_conversion", "list_slice", "closure_comprehension", "graph_break", "cell_rebind",
    "yield_from", "copysign", "closure_call", "nonlocal_closure", "comprehension_break", "attr_state",
    # protocols.py: generators finalized, set tests over generators, keyword-only and defaulted
    # parameters, a dict passed in
    "gen_close", "gen_finally", "gen_exit_return", "gen_dropped", "gen_set_test", "kwonly_default",
    "none_default", "dict_state", "dict_method",
})

#: The attributes of the program's module-level ``cfg`` object, when it has one (Program.state).
STATE_ATTRS: tuple[tuple[str, "VType"], ...] = ()


@dataclasses.dataclass(frozen=True)
class Param:
    name: str
    type: VType


@dataclasses.dataclass(frozen=True)
class Program:
    """A generated program: its source, its entry point's parameters and the features it uses."""

    seed: int
    source: str
    params: tuple[Param, ...]  # of `fuzz_main`, without the trailing `log`
    features: frozenset[str]
    entry: str = "fuzz_main"
    # The attributes of the module-level object `cfg` (empty: the program has none), which the
    # runner sets before every call and compares after it.
    state: tuple[Param, ...] = ()

    @property
    def filename(self) -> str:
        """A real-looking file name (pyframe does not trace code from files named `<...>`)."""
        return f"fuzz_{self.seed}.py"


@dataclasses.dataclass(frozen=True)
class Keyword:
    """A keyword-only parameter with its default (`*, k=2, m=None`): a tensor one defaults to None,
    and the function makes the tensor when it is not given."""

    name: str
    type: VType
    default: str  # the default's source text


@dataclasses.dataclass(frozen=True)
class Helper:
    name: str
    params: tuple[Param, ...]
    returns: VType
    takes_log: bool
    keywords: tuple[Keyword, ...] = ()  # keyword-only, after the positional ones and `log`


@dataclasses.dataclass
class Scope:
    """What a block of code can see: typed variables, and what it may do."""

    vars: dict[str, VType]
    top_level: bool  # function body, not inside a block: list appends and early returns allowed
    depth: int  # block nesting
    takes_log: bool
    returns: VType | None  # the function's return type (None: the entry, which returns anything)
    frozen: frozenset[str] = frozenset()  # loop variables: read, never rebound

    def child(self, extra: dict[str, VType] | None = None, frozen: set[str] = frozenset()) -> "Scope":
        return Scope({**self.vars, **(extra or {})}, False, self.depth + 1, self.takes_log, self.returns,
                     self.frozen | frozen)

    def names(self, want: VType) -> list[str]:
        return [n for n, t in self.vars.items() if t == want]

    def tensors(self) -> list[tuple[str, TensorT]]:
        return [(n, t) for n, t in self.vars.items() if isinstance(t, TensorT)]

    def seqs(self) -> list[tuple[str, SeqT]]:
        return [(n, t) for n, t in self.vars.items() if isinstance(t, SeqT)]


def is_plain_name(name: str) -> bool:
    """A local variable's name, not an attribute (`cfg.k`) or a dict entry (`d0["k"]`) used as one:
    only a plain name can be `nonlocal` or read by a nested function as a cell."""
    return name.isidentifier()


# ------------------------------------------------------------------------------------------------
# Shared by the writers

FLOAT_CONSTS = (0.5, 1.5, -0.25, 2.0, 0.1, -1.0)
UNARY = ("sin", "cos", "tanh", "relu", "exp")
MAX_EXPR_DEPTH = 3
MAX_BLOCK_DEPTH = 2


def fmt_shape(shape: tuple[int, ...]) -> str:
    return "()" if not shape else "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
