"""Programs that once gave a wrong result, an error eager Python does not raise, or a crash.

Each runs eagerly and under pyframe on equal inputs; results (and, where a program draws random
numbers, the RNG stream after it) must match, and a break's reason must name what stopped the trace.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import enum
import functools
import inspect
import itertools
import threading

import pytest
import torch

import pyframe
from pyframe.debug.compare import CountingBackend, assert_same_result


def run_both(fn, *args, seed=0):
    """(eager result, pyframe result, backend): each run from the same torch RNG state."""
    torch.manual_seed(seed)
    eager = fn(*args)
    eager_next = torch.rand(3)
    backend = CountingBackend()
    torch.manual_seed(seed)
    compiled = pyframe.optimize(backend)(fn)(*args)
    compiled_next = torch.rand(3)
    torch.testing.assert_close(compiled_next, eager_next, msg="the RNG stream moved on differently")
    return eager, compiled, backend


LOCK = threading.Lock()


def test_with_statement_pyframe_cannot_enter_runs_normally():
    """A graph break at BEFORE_WITH once ran the instruction on an empty stack (a segfault). A lock's
    __enter__ is C code the trace cannot model: the frame runs as plain Python, with the reason."""
    def fn(x):
        y = x * 2
        with LOCK:
            y = y + 1
        return y

    x = torch.randn(4)
    assert "graph break at BEFORE_WITH" in str(pyframe.explain(fn)(x))
    eager, compiled, _ = run_both(fn, x)
    torch.testing.assert_close(compiled, eager)


def test_identity_of_an_object_read_through_a_new_one():
    """dataclasses.asdict compares each field's kind with a module sentinel by `is`: the sentinel is
    a constant, the field a frame object; their identity was once assumed false."""
    @dataclasses.dataclass
    class Pair:
        w: torch.Tensor
        k: int = 2

    def fn(x):
        p = Pair(x)
        p.k += 1
        return dataclasses.asdict(p)

    x = torch.randn(4)
    eager, compiled, backend = run_both(fn, x)
    assert list(compiled) == ["w", "k"]
    torch.testing.assert_close(compiled, eager)


def test_module_made_in_the_frame_does_not_consume_the_rng_while_tracing():
    """nn.Linear(...) in the frame: tracing used to build it (drawing its init from the global
    RNG) before falling back, so the real run drew different weights."""
    def fn(x):
        layer = torch.nn.Linear(4, 4)
        return layer(x)

    x = torch.randn(2, 4)
    eager, compiled, _ = run_both(fn, x)
    torch.testing.assert_close(compiled, eager)


def test_parameterless_module_made_in_the_frame_is_traced():
    def fn(x):
        return torch.nn.Softmax(dim=-1)(x * 2)

    x = torch.randn(2, 4)
    eager, compiled, backend = run_both(fn, x)
    torch.testing.assert_close(compiled, eager)
    # nn.Module.__init__'s API-usage log is recorded as torch._dynamo records it
    assert [g.ops for g in backend.graphs] == [("_log_api_usage_once", "mul", "softmax")]


def test_backward_runs_outside_the_graph():
    def fn(x, w):
        (x * w).sum().backward()
        return w.grad * 2

    x = torch.randn(5)
    w1, w2 = torch.ones(5, requires_grad=True), torch.ones(5, requires_grad=True)
    torch.testing.assert_close(pyframe.optimize(CountingBackend())(fn)(x, w2), fn(x, w1))
    backend = CountingBackend()
    pyframe.optimize(backend)(fn)(x, torch.ones(5, requires_grad=True))
    assert all("backward" not in g.ops for g in backend.graphs)
    explained = pyframe.explain(fn)(x, torch.ones(5, requires_grad=True))
    assert any("backward" in r.reason for r in explained.break_reasons)


def test_next_of_an_itertools_iterator():
    """`next(islice(list, 1, None))` once rebuilt the iterator as a list after a break."""
    def fn(x):
        parts = [x + 1, x + 2]
        first = next(itertools.islice(parts, 1, None))
        print("a break with the iterator live")
        return x - first

    x = torch.randn(4)
    eager, compiled, _ = run_both(fn, x)
    torch.testing.assert_close(compiled, eager)


def test_tensor_new_with_a_size_is_uninitialized_not_data():
    def fn(x):
        return x.new(torch.Size([5, 8])).shape, x.new(2, 3).shape, x.new([1.0, 2.0])

    x = torch.randn(3)
    eager, compiled, _ = run_both(fn, x)
    assert compiled[:2] == eager[:2] == (torch.Size([5, 8]), torch.Size([2, 3]))
    torch.testing.assert_close(compiled[2], eager[2])


def test_set_grad_enabled_block_restores_the_mode_it_found():
    """`with torch.set_grad_enabled(True)` under no_grad: the mode changes when the object is made,
    and the block's exit once restored the changed mode, leaving grad on after the call."""
    def fn(a, b):
        x = a + 1
        with torch.set_grad_enabled(True):
            if torch.is_grad_enabled():
                x = x + b
        return x + 2

    a, b = torch.randn(3, requires_grad=True), torch.randn(3)
    with torch.no_grad():
        compiled = pyframe.optimize(CountingBackend())(fn)(a, b)
        assert not torch.is_grad_enabled()
        eager = fn(a, b)
    torch.testing.assert_close(compiled, eager)
    assert compiled.requires_grad == eager.requires_grad


def test_is_grad_enabled_answers_the_traced_mode():
    def fn(x):
        with torch.enable_grad():
            inside = torch.is_grad_enabled()
        return x * 2 if inside and not torch.is_grad_enabled() else x

    x = torch.randn(3)
    with torch.no_grad():
        torch.testing.assert_close(pyframe.optimize(CountingBackend())(fn)(x), fn(x))


class Mode(enum.Enum):
    FAST = 0
    SLOW = 1


def test_identity_with_an_enum_argument_is_guarded():
    """`mode is Mode.FAST` was decided once and reused for the other member (same type)."""
    def fn(x, mode):
        if mode is Mode.FAST:
            x = x + 1
        return x * 2

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    x = torch.randn(3)
    for mode in (Mode.FAST, Mode.SLOW, Mode.FAST):
        torch.testing.assert_close(compiled(x, mode), fn(x, mode))
    assert [g.ops for g in backend.graphs] == [("add", "mul"), ("mul",)]


def test_identity_with_a_user_object_argument_is_guarded():
    sentinel, other = object(), object()

    def fn(x, marker):
        return x + 1 if marker is sentinel else x - 1

    compiled = pyframe.optimize(CountingBackend())(fn)
    x = torch.randn(3)
    for marker in (sentinel, other, sentinel):
        torch.testing.assert_close(compiled(x, marker), fn(x, marker))


class Holder:
    pass


def test_values_read_through_a_mutated_object_are_loaded_before_the_replay():
    """`x = lst.pop()` makes x the frame's `lst[1]`; the replay of the pop ran before x was loaded
    from there (IndexError), and `t = obj.t; obj.t = None` returned None for t."""
    def pop_and_return(lst):
        x = lst.pop()
        return x

    def pop_then_break(lst, y):
        x = lst.pop()
        print("a break after the pop")
        return x + y

    def read_then_clear(obj):
        t = obj.t
        obj.t = None
        return t * 2, t

    def lists():
        return [torch.ones(2), torch.zeros(2)]

    for fn, make in ((pop_and_return, lambda: (lists(),)), (pop_then_break, lambda: (lists(), torch.ones(2)))):
        args, expected_args = make(), make()
        torch.testing.assert_close(pyframe.optimize(CountingBackend())(fn)(*args), fn(*expected_args))
        torch.testing.assert_close(args, expected_args)
    obj, expected_obj = Holder(), Holder()
    obj.t = expected_obj.t = torch.ones(2)
    torch.testing.assert_close(pyframe.optimize(CountingBackend())(read_then_clear)(obj), read_then_clear(expected_obj))
    assert obj.t is None


def test_isinstance_of_a_legacy_tensor_type():
    def fn(dtype, kind):
        return isinstance(torch.empty(4, dtype=dtype), kind)

    compiled = pyframe.optimize(CountingBackend())(fn)
    for dtype, kind in ((torch.float32, torch.FloatTensor), (torch.float64, torch.FloatTensor),
                        (torch.int64, torch.LongTensor), (torch.float32, (torch.DoubleTensor, torch.Tensor))):
        assert compiled(dtype, kind) == fn(dtype, kind)


def test_a_nan_argument_hits_the_cache():
    def fn(x, n):
        return x * 2 + n

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    x = torch.randn(4)
    for _ in range(3):
        torch.testing.assert_close(compiled(x, float("nan")), fn(x, float("nan")), equal_nan=True)
    assert len(backend.graphs) == 1


def test_a_hook_registered_after_compiling_is_run():
    """The cached code of a module call once ignored a forward hook registered later."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x).relu()

    net, x = Net(), torch.randn(2, 4)
    compiled = pyframe.optimize(CountingBackend())(net)
    for _ in range(3):  # cache hits: the guard tree records its snapshot of the module tree
        torch.testing.assert_close(compiled(x), net(x))
    handle = net.lin.register_forward_hook(lambda module, args, output: output * 100)
    torch.testing.assert_close(compiled(x), net(x))
    handle.remove()
    pre = net.lin.register_forward_pre_hook(lambda module, args: (args[0] * 0,))
    torch.testing.assert_close(compiled(x), net(x))
    pre.remove()
    torch.testing.assert_close(compiled(x), net(x))


def test_a_partly_consumed_generator_with_side_effects_is_not_run_ahead():
    """At a break, a live generator was rebuilt from its remaining items, made while tracing: its
    body's appends for items nobody asked for happened too."""
    def numbered(x, log):
        for i in range(3):
            log.append(i)
            yield x * i

    def fn(x, log):
        items = numbered(x, log)
        first = next(items)
        print("a break with the generator half consumed")
        second = next(items)
        return first + second, list(log)

    log, expected_log = [], []
    torch.testing.assert_close(pyframe.optimize(CountingBackend())(fn)(torch.ones(2), log),
                               fn(torch.ones(2), expected_log))
    assert log == expected_log == [0, 1]


def test_a_tensors_class_is_its_type():
    """`x.__class__` was a bound method of the tensor, so `x.__class__ is torch.Tensor` was False."""
    def fn(x, items):
        same = x.__class__ is torch.Tensor, x.__class__ is not torch.Tensor, x.__class__ == torch.Tensor
        named = f"{x.__class__.__name__} {items.__class__.__name__} {(1, 2).__class__.__name__}"
        return x.__class__(x) + 1 if x.__class__ is torch.Tensor else x - 1, same, named, [1].__class__ is list

    for x in (torch.zeros(2), torch.nn.Parameter(torch.zeros(2))):
        eager, compiled, backend = run_both(fn, x, [x])
        assert_same_result(compiled, eager)
        assert compiled[1] == (x.__class__ is torch.Tensor, x.__class__ is not torch.Tensor,
                               x.__class__ is torch.Tensor)
        assert len(backend.graphs) == 1


def test_a_closure_made_before_a_break_sees_what_is_assigned_after_it():
    """A cell still empty at the break was made anew by the resume function: the closure made
    before the break kept the old one, and reading it raised NameError."""
    def fn(x):
        def get():
            return y
        print(end="")  # a graph break with `y` unassigned
        y = x + 1
        return get()

    eager, compiled, backend = run_both(fn, torch.ones(2))
    torch.testing.assert_close(compiled, eager)
    assert len(backend.graphs) == 1


class _AcceptsAnything(type):
    def __instancecheck__(cls, instance):
        return True


class _Anything(metaclass=_AcceptsAnything):
    pass


def test_isinstance_asks_a_metaclass_with_its_own_instancecheck():
    """isinstance() was answered from the object's type alone: False for a class whose metaclass
    accepts other objects (torch's legacy storage classes do)."""
    marker = object()

    def fn(x, obj):
        return x + 1, isinstance(obj, _Anything), isinstance(3, _Anything), isinstance(x, torch.nn.Parameter)

    eager, compiled, _ = run_both(fn, torch.zeros(2), marker)
    assert compiled[1:] == eager[1:] == (True, True, False)
    storage = torch.UntypedStorage(2)
    assert pyframe.optimize(CountingBackend())(lambda x, s: (x + 1, isinstance(s, torch.UntypedStorage)))(
        torch.zeros(1), storage)[1] is True


def test_stride_is_a_tuple_and_size_a_size():
    def fn(x):
        return x.stride(), x[::2].stride(), x.size(), x.stride(0)

    eager, compiled, _ = run_both(fn, torch.randn(4, 4))
    assert compiled == eager
    assert [type(v) for v in compiled] == [tuple, tuple, torch.Size, int]


def _with_signature(*args, **kwargs):
    return args[0] + len(kwargs)


_with_signature.__signature__ = inspect.Signature([
    inspect.Parameter("a", inspect.Parameter.POSITIONAL_OR_KEYWORD),
    inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None)])


def test_a_function_advertising_another_signature_is_inlined_by_its_code():
    """A `__signature__` (torch._refs set them) described other parameters than the code takes:
    binding the call to it was an internal error and the frame ran as plain Python."""
    def fn(x):
        return _with_signature(x * 2) + 1

    eager, compiled, backend = run_both(fn, torch.ones(2))
    torch.testing.assert_close(compiled, eager)
    assert backend.graphs[0].ops == ("mul", "add", "add")


class _Base:
    def scale(self, x):
        return x * 2


class _Child(_Base):
    def scale(self, x):
        y = x + 1
        print(end="")  # a graph break: the rest runs in a resume function
        return super().scale(y)


def test_zero_argument_super_after_a_break():
    """super() reads the frame's first local; the resume function took the stack values first and
    super() raised TypeError ("obj must be an instance or subtype of type")."""
    child = _Child()
    eager, compiled, backend = run_both(child.scale, torch.ones(2))
    torch.testing.assert_close(compiled, eager)
    assert [g.ops for g in backend.graphs] == [("add",), ("mul",)]


def test_a_break_at_an_instruction_adding_to_a_container_deep_in_the_stack():
    """A mapping pattern's `**rest` copies the subject with DICT_UPDATE 2 (the dict two items
    down): a break there rebuilt only one operand, and DICT_UPDATE updated the wrong object
    (SystemError). The container and what lies above it are the instruction's operands."""
    import collections.abc

    class Settings(collections.abc.Mapping):
        def __init__(self, **values):
            self.values = values

        def __getitem__(self, key):
            return self.values[key]

        def __len__(self):
            return len(self.values)

        def __iter__(self):
            return iter(self.values)

    def fn(x, settings):
        x = x + 1
        match settings:
            case {"scale": scale, **rest}:
                return x * scale, rest
        return x, {}

    eager, compiled, backend = run_both(fn, torch.ones(2), Settings(scale=2.0, bias=1.0))
    torch.testing.assert_close(compiled, eager)
    assert len(backend.graphs) == 2  # the break at DICT_UPDATE (a user Mapping is not copied while tracing)


def test_instance_dict_of_an_object_made_while_tracing():
    """`obj.__dict__` of an instance made while tracing once gave its class's namespace (the
    descriptor was read from the class): a data descriptor of the instances is not read so."""
    class Plain:
        pass

    def fn(x):
        p = Plain()
        p.a = x + 1
        return p.__dict__

    eager, compiled, _ = run_both(fn, torch.ones(2))
    assert_same_result(compiled, eager)


def test_ordered_dict_methods_with_keyword_arguments():
    """`od.move_to_end(k, last=False)` and `od.popitem(last=False)` once ignored their keyword."""
    import collections

    def fn(x):
        d = collections.OrderedDict(a=x, b=x + 1, c=x + 2)
        d.move_to_end("b", last=False)
        order = list(d)
        key, value = d.popitem(last=False)
        return key, value, order, list(d), d.pop(key="a"), d.setdefault("z", default=x)

    eager, compiled, _ = run_both(fn, torch.ones(2))
    assert_same_result(compiled, eager)


@dataclasses.dataclass(frozen=True)
class _FrozenConfig:
    depth: int
    scale: float = 2.0


def replaces_a_frozen_dataclass(x):
    config = dataclasses.replace(_FrozenConfig(3), scale=4.0)  # its __init__ runs as a frame of its own
    return x * config.depth + config.scale, dataclasses.asdict(config)


def test_a_frozen_dataclass_half_built_is_never_hashed(caplog):
    """A frozen dataclass's __hash__ reads its fields: in its own __init__ (code made by exec,
    traced) `self` has none yet, and looking it up among the builtins once hashed it (an internal
    error, the frame run normally)."""
    with caplog.at_level("WARNING", logger="pyframe"):
        eager, compiled, backend = run_both(replaces_a_frozen_dataclass, torch.ones(3))
    assert_same_result(compiled, eager)
    assert not [r for r in caplog.records if "internal error" in r.getMessage()]


def test_inplace_operator_on_a_number_and_a_tensor():
    """`s = 0.9; s += torch.rand(...)` (EfficientNet's drop_connect) was once recorded as
    `operator.iadd(0.9, t)`, which fx writes as `0.9 += t`: a SyntaxError, and the frame ran as
    plain Python. A number has no __iadd__, so Python computes `s + t`; the graph records `add`,
    and the in-place form only once the name holds a tensor, as torch._dynamo's graph does."""
    def fn(x):
        keep = 0.8
        keep += torch.rand([x.shape[0], 1])
        n = 2
        n *= x.sum()
        n -= 1
        return x / 0.8 * torch.floor(keep), n

    eager, compiled, backend = run_both(fn, torch.ones(4, 3))
    assert_same_result(compiled, eager)
    assert [g.ops for g in backend.graphs] == [("rand", "add", "sum", "mul", "isub", "truediv", "floor", "mul")]


# -- values and types that differ from eager's (issue 19, item 7) ---------------------------------

def _same_values(fn, *args):
    """fn's result under pyframe equals eager's, compared as Python values (dicts, lists, tensors)."""
    eager, compiled, _ = run_both(fn, *args)
    _assert_same(compiled, eager)
    return compiled


def _assert_same(actual, expected) -> None:
    """Same types all the way down; tensors close, everything else equal."""
    assert type(actual) is type(expected), (actual, expected)
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected)
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _assert_same(a, e)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected)
        for key in expected:
            _assert_same(actual[key], expected[key])
    else:
        assert actual == expected


def _breaking_dict():
    print("a break inside the call")
    return {"a": 1, "b": 2}


def _breaking_list():
    print("a break inside the call")
    return [1, 2]


def test_unpacking_the_result_of_a_call_that_breaks_keeps_its_items():
    """`{**create()}` breaks at the call: the container being built is passed to the resume
    function on the stack, and what it adds to it there is a mutation of a frame value."""
    x = torch.randn(3)
    _same_values(lambda t: ({**_breaking_dict()}, t + 1), x)
    _same_values(lambda t: ({"z": 0, **_breaking_dict(), "c": 3}, t * 2), x)
    _same_values(lambda t: ([0, *_breaking_list(), 3], t - 1), x)
    _same_values(lambda t: ((0, *_breaking_list()), t - 1), x)
    _same_values(lambda t: ({0, *_breaking_list()}, t - 1), x)
    _same_values(lambda t: (dict(**_breaking_dict(), q=1), t), x)


def test_extending_with_a_generator_that_reads_the_container_as_it_grows():
    def list_extend(t):
        lst = [1]
        lst.extend(lst[i] + i for i in range(3))
        return lst, t + 1

    def deque_extend(t):
        d = collections.deque([1])
        d.extend(d[-1] + i for i in range(3))
        return list(d), t + 1

    def deque_extendleft(t):
        d = collections.deque([1])
        d.extendleft(d[0] + i for i in range(3))
        return list(d), t + 1

    def extend_with_itself(t):
        d = collections.deque([1, 2])
        d.extend(d)
        lst = [1, 2]
        lst.extend(lst)
        return list(d), lst, t

    for fn in (list_extend, deque_extend, deque_extendleft, extend_with_itself):
        _same_values(fn, torch.randn(3))


def test_locals_vars_dir_and_eval_see_what_the_frame_wrote_before():
    """They read the frame's variables: a break would run them in a frame whose slots hold the
    entry values, so the frame runs as Python."""
    def with_locals(t):
        y = 1
        y = 2
        z = t * 2
        return sorted(locals()), locals()["y"], z

    def with_vars(t):
        n = 3
        return sorted(vars()), vars()["n"], t

    def with_dir(t):
        late = 1
        return dir(), late, t

    def with_eval(t):
        k = 4
        return eval("k + 1"), t * k

    for fn in (with_locals, with_vars, with_dir, with_eval):
        _same_values(fn, torch.randn(3))

    def helper():
        w = 5
        return sorted(locals())

    _same_values(lambda t: (helper(), t + 1), torch.randn(3))  # (in an inlined call: a break)


def _two(t):
    yield t
    yield t + 1


def test_iterators_returned_from_a_frame_keep_their_types():
    x = torch.randn(3)
    cases = {
        "map": lambda t: map(lambda a: a + 1, [t, t]),
        "zip": lambda t: zip([t], [t]),
        "filter": lambda t: filter(None, [1, 0, 2]),
        "enumerate": lambda t: enumerate([t]),
        "reversed": lambda t: reversed([t, t * 2]),
        "generator": lambda t: _two(t),
        "generator expression": lambda t: (a * 2 for a in [t, t]),
        "list iterator": lambda t: iter([t, t * 3]),
        "tuple iterator": lambda t: iter((t, t * 3)),
    }
    for name, fn in cases.items():
        eager, compiled, _ = run_both(fn, x)
        assert type(compiled) is type(eager), name
        torch.testing.assert_close(list(compiled), list(eager))
    holder = Holder()

    def stores_a_map(t):
        holder.it = map(abs, [t])
        return t + 1

    pyframe.optimize("eager")(stores_a_map)(x)
    assert type(holder.it) is map

    def a_local_across_a_break(t):
        it = map(abs, [t, t])
        print("break")
        return it

    eager, compiled, _ = run_both(a_local_across_a_break, x)
    assert type(compiled) is map
    torch.testing.assert_close(list(compiled), list(eager))


def test_the_default_dtype_set_in_the_frame_reaches_the_ops_after_it():
    @contextlib.contextmanager
    def default_dtype(dtype):
        old = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            yield
        finally:
            torch.set_default_dtype(old)

    def in_block(t):
        with default_dtype(torch.float64):
            a = torch.ones(2) + 1
            b = torch.tensor([1.5])
        return a, b, torch.ones(2), t

    def direct(t):
        torch.set_default_dtype(torch.float64)
        a = torch.zeros(2)
        torch.set_default_dtype(torch.float32)
        return a, torch.zeros(2), t

    for fn in (in_block, direct):
        eager, compiled, _ = run_both(fn, torch.randn(3))
        assert [v.dtype for v in compiled] == [v.dtype for v in eager]
        assert torch.get_default_dtype() == torch.float32


_ALLOWED_LOG: list = []


def _allowed_with_a_side_effect(t):
    _ALLOWED_LOG.append(1)
    return t * 2


def _allowed_and_pure(t):
    return t.sin() * 2


torch.compiler.allow_in_graph(_allowed_with_a_side_effect)
torch.compiler.allow_in_graph(_allowed_and_pure)


def test_a_function_allowed_in_graph_with_a_side_effect_runs_once_per_call():
    def calls_it(t):
        return _allowed_with_a_side_effect(t) + 1

    opt = pyframe.optimize("eager")(calls_it)
    _ALLOWED_LOG.clear()
    x = torch.randn(3)
    for _ in range(3):
        torch.testing.assert_close(opt(x), x * 2 + 1)
    assert len(_ALLOWED_LOG) == 3  # not once more while tracing

    backend = CountingBackend()
    pure = pyframe.optimize(backend)(lambda t: _allowed_and_pure(t) + 1)
    torch.testing.assert_close(pure(x), _allowed_and_pure(x) + 1)
    assert len(backend.graphs) == 1  # free of side effects: still one node of one graph


class _Pair(collections.namedtuple("_Pair", "a b")):
    pass


def test_an_attribute_set_on_a_namedtuple_subclass_made_in_the_frame_is_kept():
    def tags(t):
        p = _Pair(t, 1)
        p.extra = 5
        return p, p.extra

    eager, compiled, _ = run_both(tags, torch.randn(3))
    assert type(compiled[0]) is _Pair and compiled[0].extra == 5 and compiled[1] == 5
    torch.testing.assert_close(tuple(compiled[0]), tuple(eager[0]))

    def same_object(t):
        p = _Pair(t, 2)
        print("break")
        return p, p

    _, (first, second), _ = run_both(same_object, torch.randn(3))
    assert first is second


def test_requires_grad_sparse_layout_and_stop_iteration_in_a_generator_are_eager_s():
    """(Right on main already; kept as the record of issue 19's checks.)"""
    def leaf(t):
        return torch.zeros(3, requires_grad=True), t.clone().requires_grad_(), torch.nn.Parameter(t * 2)

    eager, compiled, _ = run_both(leaf, torch.randn(3))
    assert [v.requires_grad for v in compiled] == [v.requires_grad for v in eager]
    assert type(compiled[2]) is torch.nn.Parameter

    def sparse(t):
        return t.to_sparse(), torch.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (3,)) + t.to_sparse()

    eager, compiled, _ = run_both(sparse, torch.randn(3))
    assert [v.layout for v in compiled] == [v.layout for v in eager]

    def raises_stop_iteration():
        yield 1
        raise StopIteration

    def pep_479(t):
        try:
            return list(raises_stop_iteration()), t
        except RuntimeError as e:
            return str(e), t

    eager, compiled, _ = run_both(pep_479, torch.randn(3))
    assert compiled[0] == eager[0] == "generator raised StopIteration"


# -- values rebuilt from other trackers: their tensors are graph outputs -----------------------------


def _compiled_records(fn, *args):
    """fn's result under pyframe, and every frame record its run left (after a reset)."""
    from pyframe import convert_frame

    pyframe.reset()
    result = pyframe.optimize("eager")(fn)(*args)
    return result, [r for records in convert_frame.records.values() for r in records]


def _view_of_a_dict_that_grows(x):
    d = {"a": x.sin()}
    view = d.values()
    d.update(b=x.cos())
    return view, len(d)


def _items_in_a_list(x):
    d = {"a": x + 1}
    return [d.items(), x * 2]


def _keys_that_are_tensors(x):
    k = x * 3
    d = {k: 1}
    return d.keys()


def _view_across_a_break(x):
    d = {"a": x.exp()}
    values = d.values()
    print("break")  # the view is live across the break: rebuilt before print runs
    return list(values)[0] + x  # (x: a tensor in the resume function's frame, which is compiled)


@pytest.mark.parametrize("fn", [_view_of_a_dict_that_grows, _items_in_a_list, _keys_that_are_tensors,
                                _view_across_a_break], ids=lambda f: f.__name__.strip("_"))
def test_a_dict_view_of_a_dict_made_in_the_frame_is_rebuilt_from_graph_outputs(fn, capsys):
    """A dict view is rebuilt as `d.values()` of its dict, rebuilt in turn from its items: the
    tensors the graph made for them must be graph outputs. The finishing walk once did not look
    through a view to its dict, and codegen failed (`tensor sin is neither a graph output nor an
    input`), an internal error that ran the frame as plain Python."""
    x = torch.randn(6)
    eager = fn(x)
    compiled, records = _compiled_records(fn, x)
    assert [r.reason for r in records if r.status != "compiled"] == []
    assert_same_result(compiled, eager)


def test_a_keys_view_compares_by_its_keys_when_the_values_are_tensors():
    """`d.keys() == {...}.keys()` needs only the keys: no graph break for tensor values."""
    def fn(x):
        d = {"a": x + 1, "b": x * 2}
        return d.keys() == {"b": 0, "a": 1}.keys(), d.keys() - {"a"}, d["a"]

    x = torch.randn(4)
    out = pyframe.explain(fn)(x)
    assert out.graph_break_count == 0 and out.graph_count == 1, str(out)
    eager, compiled, _ = run_both(fn, x)
    assert_same_result(compiled, eager)


def test_every_tracker_that_rebuilds_another_names_it_in_rebuilt_from():
    """The class of the dict-view bug: a tracker whose `reconstruct` rebuilds another tracker
    (`self.obj.reconstruct(cg)`) must return it from `rebuilt_from()` (or be a container whose
    items the finishing walk visits), so that a tensor in it becomes a graph output."""
    import re

    from pyframe.translator import live_values
    from pyframe.translator.variables import VariableTracker

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    missing = []
    for cls in set(subclasses(VariableTracker)):
        if "reconstruct" not in vars(cls):
            continue
        source = inspect.getsource(vars(cls)["reconstruct"])
        listed = inspect.getsource(cls.rebuilt_from) + inspect.getsource(live_values._held)
        for attr in set(re.findall(r"self\.(\w+)\.reconstruct\(", source)):
            if f"self.{attr}" not in listed and f"vt.{attr}" not in listed:
                missing.append(f"{cls.__qualname__}.{attr}")
    assert missing == []


class _Holder:
    pass


def test_values_read_through_an_object_are_loaded_before_the_break_runs_user_code():
    """A local read through a global object (`old = holder.w`), live across a break whose instruction
    runs user code that rebinds the attribute: the resume function received the new value (it was
    rebuilt from `holder.w` after the call). Also through a dict item and a list item of an argument
    (the fuzzer's seed 102141, minimized)."""
    holder = _Holder()

    def rebind(a):
        holder.w = a * 10
        return a.sum().item()           # a break inside the called function: the call runs as Python

    def through_attribute(x):
        old = holder.w
        n = rebind(x)
        return old + n, holder.w

    def through_item(x, d, lst):
        old_d, old_l = d["w"], lst[0]
        n = _rebind_items(x, d, lst)
        return old_d + n, old_l + n, d["w"], lst[0]

    for args in [(torch.ones(3),), (torch.full((3,), 2.0),)]:
        holder.w = torch.zeros(3)
        eager = through_attribute(*args)
        holder.w = torch.zeros(3)
        compiled = pyframe.optimize(CountingBackend())(through_attribute)(*args)
        assert_same_result(compiled, eager)

        def make():
            return {"w": torch.zeros(3)}, [torch.ones(3)]
        eager = through_item(args[0], *make())
        compiled = pyframe.optimize(CountingBackend())(through_item)(args[0], *make())
        assert_same_result(compiled, eager)


def _rebind_items(a, d, lst):
    d["w"] = a * 10
    lst[0] = a * 20
    return a.sum().item()


def test_a_sparse_tensor_argument_is_a_break_not_an_internal_error():
    # A sparse CSR tensor has no strides, which the tensor guards read: it is left to Python.
    def fn(a, b):
        return (b * 2).sum() + torch.sparse.mm(a, b).sum()

    a, b = torch.eye(3).to_sparse_csr(), torch.randn(3, 2)
    eager, compiled, backend = run_both(fn, a, b)
    torch.testing.assert_close(compiled, eager)
    assert len(backend.graphs) == 1  # (b * 2).sum(), before the sparse tensor is read
    assert not any("internal error" in r.reason for records in pyframe.convert_frame.records.values()
                   for r in records)


def test_grad_of_a_tensor_the_graph_made_is_none_only_for_a_leaf():
    import warnings

    def fn(x, p):
        leaf = x.detach() * 2  # no history: a leaf, no gradient yet
        inner = p * 2  # history: not a leaf (eager warns reading its .grad)
        return leaf.grad is None, p.grad, inner.grad is None

    x, p = torch.randn(3), torch.randn(3, requires_grad=True)
    p.grad = torch.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = fn(x, p)
        got = pyframe.optimize(CountingBackend())(fn)(x, p)
    assert got[0] is expected[0] is True and got[2] is expected[2] is True
    torch.testing.assert_close(got[1], expected[1])


def test_a_namedtuple_class_made_in_the_frame_never_outlives_the_trace():
    """Each call of the function makes a new class: one made while tracing is not handed out (nor
    are its instances), so the frame breaks where it would be, and the results are eager's."""
    def fn(x):
        Pair = collections.namedtuple("Pair", ["a", "b"])
        p = Pair(x, 2)
        return p.a * p.b, Pair, Pair(1, 2)

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    first, second = compiled(torch.ones(2)), compiled(torch.ones(2))
    torch.testing.assert_close(first[0], torch.ones(2) * 2)
    assert first[1] is not second[1]  # a class per call, as in eager
    assert first[1].__module__ == __name__ and first[2] == (1, 2) and type(first[2]) is first[1]


def test_tuple_new_of_a_namedtuple_class_makes_its_instance():
    Pair = collections.namedtuple("Pair", ["a", "b"])

    def fn(x):
        p = Pair._make([x, x + 1])
        q = tuple.__new__(Pair, (1, 2))
        return p.b - p.a + q.b, type(q) is Pair

    backend = CountingBackend()
    out = pyframe.optimize(backend)(fn)(torch.ones(2))
    torch.testing.assert_close(out[0], torch.ones(2) * 3)
    assert out[1] is True and len(backend.graphs) == 1


class _Tagged(torch.Tensor):
    """A tensor subclass that keeps torch.Tensor's __torch_function__: ops on it give _Tagged."""

    def doubled(self):
        return self * 2


def test_ops_on_a_tensor_subclass_give_the_subclass_in_the_trace():
    """`type(x * 2)` of a subclass instance x was Tensor in the trace (eager: the subclass, which
    torch.Tensor.__torch_function__ converts every result to): a wrong `type()`, `isinstance`, and
    a subclass method on a result not found."""

    def fn(x, y):
        z = x * 2 + y
        return z.doubled(), type(z).__name__, isinstance(torch.relu(z), _Tagged), type(y + 1).__name__

    x = torch.ones(3).as_subclass(_Tagged)
    compiled = pyframe.optimize("eager")(fn)
    for y in (torch.ones(3), torch.ones(3).as_subclass(_Tagged)):
        out, expected = compiled(x, y), fn(x, y)
        assert type(out[0]) is type(expected[0]) is _Tagged
        torch.testing.assert_close(out[0].as_subclass(torch.Tensor), expected[0].as_subclass(torch.Tensor))
        assert out[1:] == expected[1:]


def _version_probe():
    import importlib.metadata  # (the standard library's own code: not traced)
    return importlib.metadata.version("torch").split(".")[0]


_version_probe._dynamo_marked_constant = True  # what libraries write for assume_constant_result


@functools.lru_cache
@torch._dynamo.assume_constant_result
def _cached_probe(scale):
    return scale * int(_version_probe())


def test_functions_marked_assume_constant_result_are_called_not_traced():
    """A function marked by torch._dynamo.assume_constant_result (or by its `_dynamo_marked_constant`
    attribute, which transformers sets on its install probes) runs while tracing and its result is
    a constant, as under torch._dynamo; inlining it went into importlib.metadata and broke the
    graph (transformers 5.24's hubert, falcon_mamba: 3 graphs where Dynamo makes 1)."""
    def fn(x):
        return x * int(_version_probe()) + _cached_probe(3)

    backend = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(backend)(fn)(torch.ones(2)), fn(torch.ones(2)))
    assert len(backend.graphs) == 1
    assert pyframe.explain(fn)(torch.ones(2)).graph_break_count == 0
