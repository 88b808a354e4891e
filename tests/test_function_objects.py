"""Functions as objects: their attributes (`__code__`, `__defaults__`, `__wrapped__`), bound
methods' `__func__` and `__self__`, inspect.signature, and the globals and free variables of
functions from another module reached without a source.

Each program is compared with eager (results) and, where both trace it, with torch._dynamo (graph
counts and ops, on the same counting backend); the guard tests change a fact between calls.
"""
from __future__ import annotations

import functools
import inspect
import sys
import types

import torch
import torch._dynamo

import pyframe
from pyframe.debug.compare import CountingBackend


def _module(name: str, text: str) -> types.ModuleType:
    """A module of its own (registered in sys.modules, as an imported one is)."""
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(compile(text, f"{name}.py", "exec"), module.__dict__)
    return module


OTHER = _module("pyframe_test_other_module", """
import torch
SCALE = 2.0

@torch.no_grad()
def helper(x):
    return torch.sin(x) * SCALE

def make_closure():
    k = 3.0
    @torch.no_grad()
    def inner(x):
        return x * k + SCALE
    return inner

CLOSURE = make_closure()
""")


def _like_dynamo(fn, *args, graphs: int = 1):
    ours, dynamo = CountingBackend(), CountingBackend()
    torch.testing.assert_close(pyframe.optimize(ours)(fn)(*args), fn(*args))
    torch._dynamo.reset()
    torch._dynamo.optimize(dynamo)(fn)(*args)
    assert len(ours.graphs) == len(dynamo.graphs) == graphs
    assert [g.ops for g in ours.graphs] == [g.ops for g in dynamo.graphs]


def _recompiles_when(fn, change, undo, *args) -> CountingBackend:
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    torch.testing.assert_close(compiled(*args), fn(*args))
    change()
    try:
        torch.testing.assert_close(compiled(*args), fn(*args))
    finally:
        undo()
    assert len(backend.graphs) == 2
    return backend


# -- globals and free variables of functions reached without a source ---------------------------

def global_of_a_decorated_function_of_another_module(x):
    return OTHER.helper(x) + 1


def free_variable_of_a_decorated_closure_of_another_module(x):
    return OTHER.CLOSURE(x) + 1


def test_globals_and_free_variables_of_functions_reached_without_a_source():
    x = torch.randn(3)
    _like_dynamo(global_of_a_decorated_function_of_another_module, x)
    _like_dynamo(free_variable_of_a_decorated_closure_of_another_module, x)


def test_global_of_another_module_rebound_recompiles():
    def change():
        OTHER.SCALE = 5.0

    def undo():
        OTHER.SCALE = 2.0

    _recompiles_when(global_of_a_decorated_function_of_another_module, change, undo, torch.randn(3))
    _recompiles_when(free_variable_of_a_decorated_closure_of_another_module, change, undo, torch.randn(3))


def test_free_variable_of_another_module_rebound_recompiles():
    cell = OTHER.CLOSURE.__wrapped__.__closure__[0]

    def change():
        cell.cell_contents = 7.0

    def undo():
        cell.cell_contents = 3.0

    _recompiles_when(free_variable_of_a_decorated_closure_of_another_module, change, undo, torch.randn(3))


def test_decorated_function_replaced_by_another_recompiles():
    """The function a torch decorator wraps sits in the decorator's closure: pinned by a guard."""
    original = OTHER.CLOSURE
    _recompiles_when(free_variable_of_a_decorated_closure_of_another_module,
                     lambda: setattr(OTHER, "CLOSURE", torch.no_grad()(lambda x: x * 10.0)),
                     lambda: setattr(OTHER, "CLOSURE", original), torch.randn(3))


# -- function attributes ---------------------------------------------------------------------

def keyword_filling(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        names = func.__code__.co_varnames[:func.__code__.co_argcount]
        if "scale" in names and len(args) < len(names):
            kwargs.setdefault("scale", 2.0)
        return func(*args, **kwargs)
    return wrapper


@keyword_filling
def scaled(x, scale=1.0):
    return x * scale


def reads_code_of_the_function_it_wraps(x):
    return scaled(x) + 1


def unwraps_a_chain(x):
    f = scaled
    depth = 0
    while hasattr(f, "__wrapped__"):
        f = f.__wrapped__
        depth += 1
    return f(x) + depth + len(f.__defaults__) + f.__code__.co_argcount + len(scaled.__name__)


def test_function_attributes_like_torch_dynamo():
    _like_dynamo(reads_code_of_the_function_it_wraps, torch.randn(3))
    _like_dynamo(unwraps_a_chain, torch.randn(3))


def test_code_and_defaults_rebound_recompile():
    inner = scaled.__wrapped__
    code, defaults = inner.__code__, inner.__defaults__

    def other(x, y=3.0, scale=5.0):
        return x * y * scale

    def change():
        inner.__code__, inner.__defaults__ = other.__code__, (3.0, 5.0)

    def undo():
        inner.__code__, inner.__defaults__ = code, defaults

    backend = _recompiles_when(reads_code_of_the_function_it_wraps, change, undo, torch.randn(3))
    assert [g.ops for g in backend.graphs] == [("mul", "add"), ("mul", "mul", "add")]


def test_wrapped_set_later_recompiles():
    def plain(x):
        return x + 1

    def fn(x):
        return x * 2 if hasattr(plain, "__wrapped__") else x * 3

    def change():
        plain.__wrapped__ = fn

    def undo():
        del plain.__wrapped__

    _recompiles_when(fn, change, undo, torch.randn(3))


# -- bound methods and inspect.signature -----------------------------------------------------

def chunked(forward_fn, x):
    if len(inspect.signature(forward_fn).parameters) == 1:
        return forward_fn(x)
    return forward_fn(x, x)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def feed_forward(self, x):
        return self.lin(x).relu()

    def forward(self, x):
        assert callable(self.feed_forward) and self.feed_forward.__self__ is self
        return chunked(self.feed_forward, x) + self.feed_forward.__func__.__code__.co_argcount


def two(a, b=1.0, *, c=2):
    return a * b + c


def reads_a_signature(x):
    sig = inspect.signature(two)
    names = [p.name for p in sig.parameters.values()]
    keyword_only = [p.kind == inspect.Parameter.KEYWORD_ONLY for p in sig.parameters.values()]
    return x * len(names) + sum(keyword_only) + sig.parameters["b"].default + ("c" in sig.parameters)


def test_signature_of_a_bound_method_like_torch_dynamo():
    _like_dynamo(Block(), torch.randn(2, 4))


def test_signature_of_a_function_like_torch_dynamo():
    _like_dynamo(reads_a_signature, torch.randn(3))


def test_signature_follows_defaults_rebound():
    defaults = two.__defaults__

    def change():
        two.__defaults__ = (5.0,)

    def undo():
        two.__defaults__ = defaults

    _recompiles_when(reads_a_signature, change, undo, torch.randn(3))


# -- functools.wraps chains ------------------------------------------------------------------

def tagged(tag):
    def deco(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            return func(*args, **kwargs) + tag
        return wrapper
    return deco


def sine(x):
    return x.sin()


def wraps_applied_while_tracing(x):
    around_torch = tagged(3.0)(tagged(4.0)(torch.cos))
    around_user = tagged(5.0)(sine)
    return around_torch(x) + around_user(x) + len(around_user.__wrapped__.__name__) + \
        (around_user.__wrapped__ is sine) + (around_torch.__name__ == "cos")


def returns_a_wrapper_made_while_tracing(x):
    return tagged(2.0)(sine), x + 1


def test_wraps_chains_made_while_tracing_like_torch_dynamo():
    _like_dynamo(wraps_applied_while_tracing, torch.randn(3))


def test_wrapper_made_while_tracing_escapes_with_its_attributes():
    x = torch.randn(3)
    (wrapper, _), (expected, _) = pyframe.optimize(CountingBackend())(returns_a_wrapper_made_while_tracing)(x), \
        returns_a_wrapper_made_while_tracing(x)
    assert wrapper.__wrapped__ is sine and wrapper.__name__ == "sine"
    torch.testing.assert_close(wrapper(x), expected(x))


def test_user_function_wrapping_a_torch_function_is_not_a_torch_op():
    """functools.wraps copies `__module__ == 'torch'` onto the wrapper: it is still inlined."""
    @functools.wraps(torch.cos)
    def shifted_cos(x):
        return torch.cos(x) + 1

    def fn(x):
        return shifted_cos(x) * 2

    _like_dynamo(fn, torch.randn(3))


def test_signature_of_a_function_with_a_tensor_keyword_default_is_left_to_python():
    def weighted(x, *, w=torch.ones(3)):
        return x * w

    def fn(x):
        return x * len(inspect.signature(weighted).parameters)

    x = torch.randn(3)
    torch.testing.assert_close(pyframe.optimize(CountingBackend())(fn)(x), fn(x))


# -- attributes set on functions and tensors: recorded while tracing, replayed after the graph ---------


def _tagged_global(a):
    return a + 1


def set_attributes_on_a_global_function_and_tensors(x):
    _tagged_global.last_scale = 3
    y = x * 2
    y.tag = "scaled"
    x.seen = True
    dead = x + 1
    dead.note = "dropped"  # nothing hands `dead` back: no replay, no graph output
    return y * _tagged_global.last_scale, y


def test_attribute_stores_on_functions_and_tensors_are_replayed():
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(set_attributes_on_a_global_function_and_tensors)
    for _ in range(2):  # the first call compiles, the second hits the cache
        x = torch.randn(4)
        vars(_tagged_global).pop("last_scale", None)
        out, y = compiled(x)
        torch.testing.assert_close(out, x * 6)
        assert y.tag == "scaled" and x.seen is True and _tagged_global.last_scale == 3
    assert len(backend.graphs) == 1
    returned = backend.graphs[0].code.strip().splitlines()[-1]
    assert "dead" not in returned, returned  # nothing hands `dead` back: not a graph output


def test_partial_keywords_read_and_rebound_recompiles():
    def call(p, x):
        return p.func(x, *p.args, **p.keywords) + len(p.keywords)

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(call)
    x = torch.randn(3)
    p = functools.partial(torch.mul, 3.0)
    torch.testing.assert_close(compiled(p, x), call(p, x))
    torch.testing.assert_close(compiled(functools.partial(torch.mul, 3.0), x), call(p, x))  # equal: a hit
    assert len(backend.graphs) == 1
    q = functools.partial(torch.mul, 3.0, out=None)  # keywords' keys differ: recompiles
    torch.testing.assert_close(compiled(q, x), call(q, x))
    assert len(backend.graphs) == 2


def test_hook_registered_on_an_input_fires_in_backward_at_every_call() -> None:
    """`x.register_hook(fn)` of a closure made in the frame: one graph (torch._dynamo's too); the
    hook is registered after it on each call's own input, and scales its gradient in backward."""
    def fn(x, k):
        def hook(grad):
            return grad * k

        handle_unused = x.register_hook(hook)  # noqa: F841 (its handle is never used)
        return (x * x).sum()

    for backend_of in (pyframe.optimize, torch._dynamo.optimize):
        backend = CountingBackend()
        compiled = backend_of(backend)(fn)
        for k in (2.0, 2.0):
            x = torch.ones(3, requires_grad=True)
            compiled(x, k).backward()
            torch.testing.assert_close(x.grad, torch.full((3,), 2.0 * k))
        assert len(backend.graphs) == 1, backend_of
        torch._dynamo.reset()


def test_a_used_hook_handle_breaks_at_the_registration() -> None:
    def fn(x):
        handle = x.register_hook(lambda grad: grad * 5)
        handle.remove()
        return (x * 3).sum()

    backend = CountingBackend()
    x = torch.ones(3, requires_grad=True)
    pyframe.optimize(backend)(fn)(x).backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 3.0))
    assert [g.ops for g in backend.graphs] == [("mul", "sum")]


def _frozen_dataclass_made_in_the_frame(x):
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Settings:
        k: int = 2

    return x * dataclasses.replace(Settings(), k=5).k


def test_a_function_made_inside_a_library_call_is_rebuilt_with_the_library_globals():
    """dataclass(frozen=True) returns a closure made inside dataclasses; calling it is a graph break,
    which rebuilds that closure: with dataclasses' globals, where its names are (MAKE_FUNCTION in
    the compiled frame would give it the frame's, and `_process_class` would be a NameError)."""
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(_frozen_dataclass_made_in_the_frame)
    for _ in range(2):
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), x * 5)
    dynamo = CountingBackend()
    torch._dynamo.reset()
    torch.compile(_frozen_dataclass_made_in_the_frame, backend=dynamo)(torch.randn(3))
    assert len(backend.graphs) >= 1 and backend.graphs[0].ops == dynamo.graphs[0].ops


def _partial_of_a_partial(x):
    p = functools.partial(functools.partial(torch.mul, x), 3)
    return p(), p.func is torch.mul, p.args[1:], functools.partial(p, out=None).keywords


def test_a_partial_of_a_partial_is_flattened_as_cpython_flattens_it():
    """partial(partial(f, a), b) is partial(f, a, b): `.func` is f, `.args` (a, b) (torch._dynamo
    2.13 gets this wrong: it keeps the inner partial as `.func`)."""
    x = torch.randn(3)
    result = pyframe.optimize("eager")(_partial_of_a_partial)(x)
    expected = _partial_of_a_partial(x)
    torch.testing.assert_close(result[0], expected[0])
    assert result[1:] == expected[1:] == (True, (3,), {"out": None})
