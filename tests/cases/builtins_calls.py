"""Corpus: builtins, math, operator and string formatting on constants, feeding tensor work; globals
and module attributes; torch.compiler.is_compiling() and fx's is_fx_tracing()."""

import math
import operator

import torch
import torch.nn.functional as F

from pyframe.debug.cases import case

SCALE = 3.0
CONFIG = {"eps": 1e-5, "mode": "sum"}


@case(inputs=lambda: torch.randn(4))
def builtins_on_constants(x):
    return x * max(1, 2) + min([3, 4]) + abs(-2) + len((1, 2)) + int("3") + float(2) + bool(0) + round(2.6)


@case(inputs=lambda: torch.randn(4))
def math_and_operator(x):
    return x * math.cos(math.pi / 3) + math.floor(2.7) + math.sqrt(4) + operator.mul(2, 3) + math.log(math.e)


@case(inputs=lambda: torch.randn(4))
def string_formatting(x):
    name = f"{x.shape[0]}-{3:02d}"
    label = "{}-{:.2f}".format("a", 1.234)
    return x * len(name) + len(label) if name.startswith("4") else x


@case(inputs=lambda: torch.randn(4))
def any_all_sorted_sum(x):
    sizes = sorted([3, 1, 2])
    if all(s > 0 for s in x.shape) and any([False, True]):
        return x * sizes[0] + sum(sizes)
    return x


@case(inputs=lambda: torch.randn(4))
def getattr_hasattr(x):
    scale = getattr(x, "missing", 3) if not hasattr(x, "missing") else 1
    return getattr(torch, "relu")(x) * scale + getattr(F, "gelu")(x)


@case(inputs=lambda: torch.randn(4))
def globals_and_module_constants(x):
    y = x * SCALE + CONFIG["eps"]
    return y.sum() if CONFIG["mode"] == "sum" else y.mean()


@case(inputs=lambda: torch.randn(4))
def is_compiling_takes_the_compiled_path(x):
    """Both paths compute the same; the graph's op shows which one was traced (mul, as in dynamo)."""
    if torch.compiler.is_compiling():
        return x * 2
    return x + x


@case(inputs=lambda: (torch.randn(4), torch.randn(4)))
def min_max_of_tensors(x, y):
    a, b = x.sum(), y.sum()
    a = min(max(a, 0), 1)
    return max(a, b) - min(a, b) + x


@case(inputs=lambda: (torch.randn(4), torch.randn(4)))
def operator_getters(x, y):
    return operator.itemgetter(1)((x, y)) + x * operator.attrgetter("shape")(x)[0]


@case(inputs=lambda: torch.randn(4))
def type_checks(x):
    return x * 2 if type(x) is torch.Tensor and issubclass(type(x), torch.Tensor) else x


@case(inputs=lambda: torch.randn(3, 4))
def shape_queries_are_constants(x):
    return x * x.numel() + x.size(1) + x.shape[-1] + x.dim() + len(x)


@case(inputs=lambda: torch.randn(4))
def min_max_with_key_and_default(x):
    """key= is called per item (a lambda, traced), ties go to the first item, default= for empty."""
    layers = [(3, "a"), (1, "b"), (3, "c")]
    best = max(layers, key=lambda pair: pair[0])
    worst = min(layers, key=lambda pair: pair[0])
    return x * best[0] + len(best[1] + worst[1]) + min([], default=4) + max(2, 5, key=lambda v: -v)


class _CallableInstance:
    def __call__(self, x):
        return x


@case(inputs=lambda: torch.randn(4))
def callable_of_every_kind(x):
    """callable() asks the value's type, not its metaclass: a list is not callable, the list type is."""
    kinds = [lambda v: v, torch.abs, sum, _CallableInstance(), _CallableInstance, [1], (1,), "s", 3, x, list]
    return [x + i for i, kind in enumerate(kinds) if callable(kind)]


@case(inputs=lambda: torch.randn(4))
def fx_tracing_queries(x):
    """torch.fx's queries are False while compiling (library code picks its eager path)."""
    from torch.fx._symbolic_trace import is_fx_symbolic_tracing, is_fx_tracing

    if is_fx_tracing() or torch.fx._symbolic_trace.is_fx_symbolic_tracing() or is_fx_symbolic_tracing():
        return x - 1
    return x + 1


@case(inputs=lambda: torch.randn(4))
def relative_imports_in_the_frame(x):
    """`from . import m` / `from .m import f` inside a function: resolved against the frame's
    package, the modules already imported."""
    from . import inlining
    from .inlining import _affine

    return _affine(x) + inlining._affine(x, shift=0.5)


@case(inputs=lambda: ([torch.randn(3), torch.randn(2, 2), torch.randn(5)], torch.randn(4, 6)))
def sorted_with_a_key(tensors, x):
    """sorted() of tensors by a key known while tracing (their numel), reversed; sorted() of ints
    by a lambda; both keep Python's stable order."""
    biggest_first = sorted(tensors, key=lambda t: t.numel(), reverse=True)
    cols = list(x.unbind(1))
    order = sorted(range(len(cols)), key=lambda i: (i % 2, -i))
    return [t * 2 for t in biggest_first], torch.stack([cols[i] for i in order], 1)


@case(inputs=lambda: torch.randn(4, 3))
def list_sort_in_place(x):
    """list.sort(key=..., reverse=...) on a list made in the frame: tensors ordered by a constant
    field of their pair."""
    pairs = list(zip([3, 1, 2, 0], x.unbind(0)))
    pairs.sort(key=lambda p: p[0])
    names = ["b", "a", "c"]
    names.sort(reverse=True)
    return torch.stack([t for _, t in pairs]), names


@case(inputs=lambda: torch.randn(4))
def number_formatting_builtins(x):
    """bin(), oct(), hex() and ascii() on constants fold to strings."""
    return x * bin(5).count("1") + int(hex(255), 16) + len(oct(8)) + len(ascii("é"))


@case(inputs=lambda: torch.randn(4))
def error_of_a_builtin_on_constants_is_caught(x):
    """`1 / 0` and `int("zz")` raise in the traced program, where the try or with block catches them."""
    try:
        y = x + int("zz")
    except ValueError as e:
        y = x - len(str(e))
    with _Suppress(ZeroDivisionError):
        y = y * 2
        y = y + 1 / 0
    return y


class _Suppress:
    def __init__(self, kind):
        self.kind = kind

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        return kind is self.kind


@case(inputs=lambda: torch.randn(4))
def class_methods_of_builtin_types(x):
    """int.from_bytes and float.fromhex on constants fold."""
    return x * int.from_bytes(b"\x01\x00", "little") + float.fromhex("0x1p3")


@case(inputs=lambda: torch.randn(4))
def interpreter_version_checks(x):
    """sys.version_info (a structseq of constants) compared with a tuple, indexed and read by name."""
    import sys

    if sys.version_info >= (3, 8):
        x = x + 1
    return x * sys.version_info.major + sys.version_info[1] * 0


@case(inputs=lambda: torch.randn(4))
def identity_of_containers_made_in_the_frame(x):
    """Two lists, dicts or sets made while tracing are two objects; one bound to two names is one."""
    a = [1]
    b = a
    c = [1]
    d, e = {}, {}
    return x * ((a is b) + (a is not c) + (a == c) + (d is e) + ({1} is not {1}))
