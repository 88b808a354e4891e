"""Guard trees of the C layer (docs/c_layer.md section 5): each leaf kind, each root and accessor,
fetch-once semantics, texts, and the same trees checked by the hook through fast-local slots."""
import collections
import gc
import types
import weakref

import pytest
import torch

from pyframe import _C

G = {"g": 1}
B = {"len": len}


def check(root, f_locals=None, f_globals=G, f_builtins=B, closure=None):
    return root.check(f_locals or {}, f_globals, f_builtins, closure)


def one_leaf(name, add):
    root = _C.RootGuardManager()
    add(root.local(name, 0))
    return root


# ---- leaves -------------------------------------------------------------------------------------


def test_type_match_is_exact():
    root = one_leaf("x", lambda n: n.add_type_match(int, "type(x) is int"))
    assert check(root, {"x": 3})
    assert not check(root, {"x": True})  # bool is a subclass: not the same type
    assert not check(root, {"x": 3.0})
    assert root.first_failure({"x": 3.0}, G, B) == "type(x) is int"
    assert root.first_failure({"x": 3}, G, B) is None


def test_id_match_strong_and_weak():
    class Obj:
        pass

    obj = Obj()
    root = one_leaf("x", lambda n: n.add_id_match(obj))
    assert check(root, {"x": obj}) and not check(root, {"x": Obj()})

    strong = one_leaf("x", lambda n: n.add_id_match(None))  # None has no weakrefs: strong
    assert check(strong, {"x": None}) and not check(strong, {"x": 0})

    victim = Obj()
    victim_ref = weakref.ref(victim)
    weak = one_leaf("x", lambda n, target=victim: n.add_id_match(target))
    assert check(weak, {"x": victim})
    del victim
    gc.collect()
    assert victim_ref() is None  # the guard did not keep it alive
    assert not check(weak, {"x": Obj()})  # and it fails once it died (whatever now has its id)


def test_equals_match_needs_same_type():
    root = one_leaf("x", lambda n: n.add_equals_match(1))
    assert check(root, {"x": 1})
    assert not check(root, {"x": True}) and not check(root, {"x": 1.0}) and not check(root, {"x": 2})
    tup = one_leaf("x", lambda n: n.add_equals_match((1, "a")))
    assert check(tup, {"x": (1, "a")}) and not check(tup, {"x": [1, "a"]})


def test_none_and_not_none():
    none = one_leaf("x", lambda n: n.add_none_match())
    not_none = one_leaf("x", lambda n: n.add_not_none_match())
    assert check(none, {"x": None}) and not check(none, {"x": 0})
    assert check(not_none, {"x": 0}) and not check(not_none, {"x": None})
    assert none.texts() == ["L['x'] is None"]


def test_len_match():
    root = one_leaf("x", lambda n: n.add_len_match(2))
    assert check(root, {"x": [1, 2]}) and check(root, {"x": (1, 2)}) and check(root, {"x": {1: 1, 2: 2}})
    assert check(root, {"x": "ab"})
    assert not check(root, {"x": [1]}) and not check(root, {"x": 5})  # len(5) raises: fails


def test_attrs_len_match_sizes_each_attribute():
    obj = types.SimpleNamespace(a=[], b={1: 2})
    root = one_leaf("x", lambda n: n.add_attrs_len_match(["a", "b"], [0, 1], "lengths"))
    assert check(root, {"x": obj}) and root.texts() == ["lengths"]
    obj.a.append(1)
    assert not check(root, {"x": obj})  # a length differs
    assert not check(root, {"x": types.SimpleNamespace(a=[])})  # an attribute is missing: fails
    assert not check(root, {"x": types.SimpleNamespace(a=[], b=5)})  # not sized: fails
    with pytest.raises(ValueError):
        one_leaf("x", lambda n: n.add_attrs_len_match(["a"], [0, 1]))


def test_dict_keys_match_in_order():
    root = one_leaf("x", lambda n: n.add_dict_keys_match(("a", "b")))
    assert check(root, {"x": {"a": 1, "b": 2}})
    assert not check(root, {"x": {"b": 2, "a": 1}})
    assert not check(root, {"x": {"a": 1}}) and not check(root, {"x": [("a", 1), ("b", 2)]})


def test_dict_keys_match_reads_the_dict_behind_a_mappingproxy():
    class Cls:
        a = 1

    keys = tuple(vars(Cls))
    root = one_leaf("x", lambda n: n.add_dict_keys_match(keys))
    assert check(root, {"x": Cls.__dict__}) and check(root, {"x": types.MappingProxyType(dict(vars(Cls)))})
    Cls.b = 2  # the proxy is a live view of the class's dict
    assert not check(root, {"x": Cls.__dict__})
    del Cls.b
    assert check(root, {"x": Cls.__dict__})
    assert not check(root, {"x": types.MappingProxyType(collections.UserDict(vars(Cls)))})  # not a dict behind


def test_hasattr_match_present_and_absent():
    class Plain:
        pass

    present = one_leaf("x", lambda n: n.add_hasattr_match("a", True))
    absent = one_leaf("x", lambda n: n.add_hasattr_match("a", False))
    obj = Plain()
    assert not check(present, {"x": obj}) and check(absent, {"x": obj})
    assert absent.texts() == ["not hasattr(L['x'], 'a')"]
    obj.a = 1
    assert check(present, {"x": obj}) and not check(absent, {"x": obj})
    Plain.b = 2  # a class attribute counts, as in hasattr()
    assert one_leaf("x", lambda n: n.add_hasattr_match("b", True)).check({"x": Plain()}, G, B)


def test_call_match_on_global_state():
    root = _C.RootGuardManager()
    root.add_call_match(torch.is_grad_enabled, True, "grad mode on")
    assert check(root)
    with torch.no_grad():
        assert not check(root)
        assert root.first_failure({}, G, B) == "grad mode on"
    default_dtype = _C.RootGuardManager()
    default_dtype.add_call_match(torch.get_default_dtype, torch.float32)
    assert check(default_dtype)


def test_torch_state_match_reads_torch_thread_locals():
    def root_with(state, expected):
        root = _C.RootGuardManager()
        root.add_torch_state_match(state, expected, f"{state} is {expected}")
        return root

    grad, no_grad = root_with("grad_mode", True), root_with("grad_mode", False)
    assert check(grad) and not check(no_grad)
    with torch.no_grad():
        assert not check(grad) and check(no_grad)
        assert grad.first_failure({}, G, B) == "grad_mode is True"
    inference = root_with("inference_mode", False)
    with torch.inference_mode():
        assert not check(inference)
    assert check(inference)
    float32 = root_with("default_dtype", torch.float32)
    torch.set_default_dtype(torch.float64)
    try:
        assert not check(float32) and check(root_with("default_dtype", torch.float64))
    finally:
        torch.set_default_dtype(torch.float32)
    assert check(float32)
    off, bf16 = root_with("autocast_cpu", None), root_with("autocast_cpu", torch.bfloat16)
    assert check(off) and not check(bf16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not check(off) and check(bf16)
        assert check(root_with("autocast_cuda", None))
    with torch.autocast("cpu", dtype=torch.float16):
        assert not check(off) and not check(bf16)


def test_torch_state_match_rejects_bad_arguments():
    root = _C.RootGuardManager()
    with pytest.raises(ValueError, match="unknown state 'grad'"):
        root.add_torch_state_match("grad", True)
    with pytest.raises(TypeError, match="grad_mode expects a bool"):
        root.add_torch_state_match("grad_mode", 1)
    with pytest.raises(TypeError, match="default_dtype expects a torch.dtype"):
        root.add_torch_state_match("default_dtype", "float32")
    root.add_torch_state_match("autocast_cpu", None)
    assert root.texts() == ["autocast_cpu == None"]


# ---- TENSOR_MATCH -------------------------------------------------------------------------------


def tensor_root(t, name="t"):
    root = _C.RootGuardManager()
    root.local(name, 0).add_tensor_match(
        type(t), t.dtype, t.device, tuple(t.shape), t.stride(), t.requires_grad, f"check_tensor({name})"
    )
    return root


def test_tensor_match_passes_on_same_metadata():
    t = torch.randn(3, 4)
    root = tensor_root(t)
    assert check(root, {"t": t}) and check(root, {"t": torch.zeros(3, 4)})
    assert root.texts() == ["check_tensor(t)"]


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(lambda: torch.randn(3, 4, dtype=torch.float64), id="dtype"),
        pytest.param(lambda: torch.randn(4, 3), id="shape"),
        pytest.param(lambda: torch.randn(3), id="ndim"),
        pytest.param(lambda: torch.randn(4, 3).t(), id="stride"),
        pytest.param(lambda: torch.randn(3, 4, requires_grad=True), id="requires_grad"),
        pytest.param(lambda: torch.empty(3, 4, device="meta"), id="device"),
        pytest.param(lambda: torch.nn.Parameter(torch.randn(3, 4), requires_grad=False), id="subclass"),
        pytest.param(lambda: [[0.0] * 4] * 3, id="not-a-tensor"),
        pytest.param(lambda: None, id="none"),
    ],
)
def test_tensor_match_fails_on_any_change(other):
    root = tensor_root(torch.randn(3, 4))
    assert not check(root, {"t": other()})
    assert root.first_failure({"t": other()}, G, B) == "check_tensor(t)"


def test_tensor_match_strides_with_size_one_dims_and_non_contiguous():
    base = torch.randn(1, 5)
    root = tensor_root(base)
    assert check(root, {"t": torch.randn(1, 5)})
    odd = torch.randn(5, 2)[:, :1].t()  # size (1, 5), stride (1, 2): contiguous in torch's sense
    assert tuple(odd.shape) == (1, 5) and odd.stride() != base.stride()
    assert not check(root, {"t": odd})

    transposed = torch.randn(4, 3).t()
    troot = tensor_root(transposed)
    assert check(troot, {"t": torch.randn(4, 3).t()}) and not check(troot, {"t": torch.randn(3, 4)})

    scalar = tensor_root(torch.tensor(1.0))
    assert check(scalar, {"t": torch.tensor(2.0)}) and not check(scalar, {"t": torch.tensor([2.0])})


def test_tensor_match_meta_device_and_parameter_type():
    meta = torch.empty(2, 2, device="meta")
    root = tensor_root(meta)
    assert check(root, {"t": torch.empty(2, 2, device="meta")}) and not check(root, {"t": torch.empty(2, 2)})
    p = torch.nn.Parameter(torch.randn(2))
    proot = tensor_root(p)
    assert check(proot, {"t": torch.nn.Parameter(torch.randn(2))})
    assert not check(proot, {"t": torch.randn(2, requires_grad=True)})


def test_tensor_match_after_in_place_metadata_change():
    t = torch.randn(2, 3)
    root = tensor_root(t)
    assert check(root, {"t": t})
    t.t_()
    assert not check(root, {"t": t})
    t.t_()
    t.requires_grad_(True)
    assert not check(root, {"t": t})


# ---- nodes, accessors, roots --------------------------------------------------------------------


def test_attr_and_item_accessors():
    class Box:
        def __init__(self):
            self.items = {"k": [10, 20]}

    root = _C.RootGuardManager()
    items = root.local("box", 0).attr("items")
    items.item("k").item(1).add_equals_match(20)
    assert items.source == "L['box'].items"
    assert check(root, {"box": Box()})
    box = Box()
    box.items["k"][1] = 21
    assert not check(root, {"box": box})
    assert root.first_failure({"box": box}, G, B) == "L['box'].items['k'][1] == 20"
    del box.items
    assert not check(root, {"box": box})  # attribute error: fails, error cleared


def test_dict_item_is_an_exact_lookup():
    root = _C.RootGuardManager()
    root.local("d", 0).item("missing").add_none_match()
    d = collections.defaultdict(list)
    assert not check(root, {"d": d})
    assert "missing" not in d  # __missing__ was not called

    class Loud(dict):
        def __getitem__(self, key):
            raise AssertionError("__getitem__ must not run")

    hit = _C.RootGuardManager()
    hit.local("d", 0).item("k").add_equals_match(1)
    assert check(hit, {"d": Loud(k=1)})


def test_global_builtin_and_closure_roots():
    root = _C.RootGuardManager()
    root.global_("g").add_equals_match(1)
    root.builtin("len").add_id_match(len)
    assert check(root, {}, {"g": 1}, {"len": len})
    assert not check(root, {}, {"g": 2}, {"len": len})
    assert not check(root, {}, {}, {"len": len})  # absent global fails
    assert not check(root, {}, {"g": 1}, {"len": abs})

    def make(v):
        def f():
            return v

        return f

    croot = _C.RootGuardManager()
    croot.closure(0).add_equals_match(5)
    assert check(croot, closure=make(5).__closure__)
    assert not check(croot, closure=make(6).__closure__)
    assert not check(croot, closure=None)

    def empty_cell():
        if False:
            w = 0  # noqa: F841

        def f():
            return w  # noqa: F821

        return f

    assert not check(croot, closure=empty_cell().__closure__)


def test_same_child_twice_is_the_same_node():
    root = _C.RootGuardManager()
    x = root.local("x", 0)
    assert root.local("x", 0) is x
    assert x.attr("a") is x.attr("a")
    assert x.item(1) is x.item(1)
    assert x.item(1) is not x.item(True)  # keys compare with their type
    assert root.global_("g") is root.global_("g") and root.closure(0) is root.closure(0)


def test_value_is_fetched_once_per_check():
    class Counting:
        reads = 0

        @property
        def value(self):
            Counting.reads += 1
            return 7

    root = _C.RootGuardManager()
    node = root.local("c", 0).attr("value")
    node.add_type_match(int)
    node.add_equals_match(7)
    node.add_not_none_match()
    assert check(root, {"c": Counting()})
    assert Counting.reads == 1


def test_checks_run_in_order_and_stop_at_first_failure():
    calls = []

    class Eq:
        def __init__(self, tag, result):
            self.tag, self.result = tag, result

        def __eq__(self, other):  # v == expected asks v, which reports the expected one
            calls.append(other.tag)
            return other.result

    root = _C.RootGuardManager()
    node = root.local("x", 0)
    a, b = Eq("a", True), Eq("b", False)
    node.add_type_match(Eq, "first")
    node.add_equals_match(a, "second")
    node.add_equals_match(b, "third")
    node.add_equals_match(Eq("c", True), "fourth")
    x = Eq("x", True)
    assert root.texts() == ["first", "second", "third", "fourth"]
    assert not check(root, {"x": x})
    assert calls == ["a", "b"]  # stopped at the first failure
    assert root.first_failure({"x": x}, G, B) == "third"


def test_exceptions_mean_failure_and_are_cleared():
    class Bad:
        @property
        def boom(self):
            raise RuntimeError("no")

        def __eq__(self, other):
            raise RuntimeError("no eq")

    root = _C.RootGuardManager()
    root.local("x", 0).attr("boom").add_not_none_match("x.boom is not None")
    assert not check(root, {"x": Bad()})
    assert root.first_failure({"x": Bad()}, G, B) == "x.boom is not None"
    eq = one_leaf("x", lambda n: n.add_equals_match(Bad()))
    assert not check(eq, {"x": Bad()})
    missing = _C.RootGuardManager()
    missing.local("nope", 0)
    assert missing.first_failure({}, G, B) == "L['nope'] cannot be read"


def test_texts_in_tree_order_and_default_texts():
    root = _C.RootGuardManager()
    root.add_call_match(torch.is_grad_enabled, True)
    x = root.local("x", 0)
    x.add_type_match(int)
    x.attr("real").add_equals_match(3)
    root.global_("g").add_len_match(2)
    assert root.texts() == [
        "is_grad_enabled() == True",
        "type(L['x']) is int",
        "L['x'].real == 3",
        "len(G['g']) == 2",
    ]
    assert len(root) == 4


# ---- the same trees on the hook's path ----------------------------------------------------------


K = 1


def test_hook_reads_fast_locals_by_slot_and_globals():
    global K

    def f(a, b):
        return a + b + K

    def f_alt(a, b):
        return ("alt", a, b)

    installs = []

    def callback(frame):
        if frame.f_code is not f.__code__:
            return None
        root = _C.RootGuardManager()
        root.local("b", 1).add_type_match(type(frame.f_locals["b"]))
        t = frame.f_locals["a"]
        root.local("a", 0).add_tensor_match(type(t), t.dtype, t.device, tuple(t.shape), t.stride(), t.requires_grad)
        root.global_("K").add_equals_match(K)
        root.add_call_match(torch.is_grad_enabled, torch.is_grad_enabled())
        installs.append(root)
        return (f_alt.__code__, root, len(installs))

    run = _C.CallbackScope(f, callback)
    x = torch.randn(3)
    try:
        assert run(x, 1)[0] == "alt"
        assert run(torch.randn(3), 2)[0] == "alt" and len(installs) == 1  # hit
        run(torch.randn(4), 2)  # shape change
        run(x, 2.0)  # type change on the second slot
        K = 2
        run(x, 1)  # global change
        with torch.no_grad():
            run(x, 1)  # global state change
        assert len(installs) == 5
        assert [e.info for e in _C.get_cache_entries(f.__code__)] == [5, 4, 3, 2, 1]
    finally:
        K = 1
        _C.reset()


def test_tensor_match_reads_that_throw_fail_the_check():
    # A sparse tensor has the same type, dtype, device and sizes, but no strides: torch throws
    # while reading them, and the check fails instead of raising or crashing.
    root = tensor_root(torch.randn(3, 4))
    sparse = torch.randn(3, 4).to_sparse()
    assert not check(root, {"t": sparse})
    assert root.first_failure({"t": sparse}, G, B) == "check_tensor(t)"


def test_tensor_match_rejects_what_is_not_tensor_metadata():
    t = torch.randn(2)
    node = _C.RootGuardManager().local("t", 0)
    with pytest.raises(TypeError, match="torch.Tensor"):
        node.add_tensor_match(list, t.dtype, t.device, (2,), (1,), False, "x")
    with pytest.raises(TypeError, match="torch.dtype"):
        node.add_tensor_match(torch.Tensor, "float32", t.device, (2,), (1,), False, "x")
    with pytest.raises(TypeError, match="torch.device"):
        node.add_tensor_match(torch.Tensor, t.dtype, "cpu", (2,), (1,), False, "x")


# ---- unchanged subtrees (checks skipped while the dicts and types they read are unchanged) -------


class Holder:
    def __init__(self, **attrs):
        self.__dict__.update(attrs)


def pinned_root(obj, build, skip=True):
    """A tree on local `o` pinned by ID_MATCH, with `build(node)` adding the subtree."""
    root = _C.RootGuardManager(skip)
    node = root.local("o", 0)
    node.add_id_match(obj, "o is obj")
    build(node)
    return root


def test_unchanged_subtree_is_skipped_and_a_changed_one_rechecked():
    child = Holder(n=3)
    obj = Holder(child=child, name="a")
    root = pinned_root(obj, lambda n: (n.attr("child").add_id_match(child, "child"),
                                       n.attr("child").attr("n").add_equals_match(3, "n == 3"),
                                       n.attr("name").add_equals_match("a", "name == 'a'")))
    assert check(root, {"o": obj}) and check(root, {"o": obj})
    child.n = 4          # the child's dict changes: its version does
    assert not check(root, {"o": obj})
    child.n = 3
    assert check(root, {"o": obj})
    obj.name = "b"       # the root object's own dict
    assert not check(root, {"o": obj})
    obj.name = "a"
    obj.child = Holder(n=3)  # rebinding: a new object where an ID_MATCH expects the old one
    assert not check(root, {"o": obj})
    obj.child = child
    assert check(root, {"o": obj})
    obj.__dict__ = {"child": child, "name": "b"}  # a new instance dict
    assert not check(root, {"o": obj})


def _counter_with_cell(start):
    value = start

    def read():
        return value

    def write(v):
        nonlocal value
        value = v

    return read, write


def test_a_value_no_dict_version_covers_is_fetched_again_and_compared_by_identity():
    """A method's closure cell (class attribute -> function -> closure -> cell contents): none of
    those reads comes from an instance dict, so each is an anchor, fetched again on a skipped check:
    the same objects, the facts beneath them stand; another object, everything is checked."""
    read, write = _counter_with_cell(3)

    class K:
        pass

    K.read = staticmethod(read)
    obj = Holder(k=K())
    cell = lambda n: n.attr("k").attr("__class__").attr("read").attr("__closure__").item(0).attr("cell_contents")
    root = pinned_root(obj, lambda n: cell(n).add_equals_match(3, "cell == 3"))
    assert check(root, {"o": obj}) and check(root, {"o": obj})
    write(4)  # a cell has no version: its anchor sees another object
    assert not check(root, {"o": obj})
    write(3)
    assert check(root, {"o": obj}) and check(root, {"o": obj})
    other, _ = _counter_with_cell(3)
    K.read = staticmethod(other)  # the class's dict (and version tag) change: a new function
    assert check(root, {"o": obj})  # ... whose cell holds 3 as well
    K.read = staticmethod(_counter_with_cell(5)[0])
    assert not check(root, {"o": obj})


def test_an_attribute_a_python_getattribute_gives_is_fetched_again():
    class Config:
        def __getattribute__(self, key):
            return super().__getattribute__(key)

    cfg = Config()
    cfg.size = 4
    obj = Holder(cfg=cfg)
    root = pinned_root(obj, lambda n: (n.attr("cfg").attr("size").add_equals_match(4, "cfg.size == 4"),
                                       n.attr("cfg").attr("__dict__").item("size").add_equals_match(4, "d")))
    assert check(root, {"o": obj}) and check(root, {"o": obj})
    cfg.size = 5
    assert not check(root, {"o": obj})
    cfg.size = 4
    assert check(root, {"o": obj}) and check(root, {"o": obj})
    Config.__getattribute__ = lambda self, key: 7 if key == "size" else object.__getattribute__(self, key)
    assert not check(root, {"o": obj})  # what the class's own lookup gives now


def test_mutable_values_and_descriptors_are_always_checked():
    class WithProperty:
        source = [1]

        @property
        def p(self):
            return WithProperty.source[0]

    items = [1, 2]
    obj = Holder(items=items, prop=WithProperty())
    root = pinned_root(obj, lambda n: (n.attr("items").item(0).add_equals_match(1, "items[0] == 1"),
                                       n.attr("prop").attr("p").add_equals_match(1, "prop.p == 1")))
    assert check(root, {"o": obj}) and check(root, {"o": obj})
    items[0] = 5  # a list changes without any version: never skipped
    assert not check(root, {"o": obj})
    items[0] = 1
    assert check(root, {"o": obj})
    WithProperty.source[0] = 2  # a property's value changes with no dict touched
    assert not check(root, {"o": obj})


def test_type_changes_are_seen():
    class A:
        pass

    class B:
        pass

    inner = A()
    inner.x = 1
    obj = Holder(inner=inner)
    root = pinned_root(obj, lambda n: (n.attr("inner").add_type_match(A, "type(inner) is A"),
                                       n.attr("inner").attr("x").add_equals_match(1, "inner.x == 1")))
    assert check(root, {"o": obj}) and check(root, {"o": obj})
    A.x = property(lambda self: 2)  # a data descriptor now wins over the instance dict
    assert not check(root, {"o": obj})
    del A.x
    assert check(root, {"o": obj})
    inner.__class__ = B
    assert not check(root, {"o": obj})


def test_hasattr_below_a_pinned_node_is_rechecked_when_the_attribute_appears():
    class Cfg:
        pass

    inner = Cfg()
    obj = Holder(cfg=inner)
    root = pinned_root(obj, lambda n: n.attr("cfg").add_hasattr_match("shift", False, "not hasattr(cfg, 'shift')"))
    assert check(root, {"o": obj}) and check(root, {"o": obj})
    inner.shift = 1.0  # the instance dict gains it
    assert not check(root, {"o": obj})
    del inner.shift
    assert check(root, {"o": obj})
    Cfg.shift = 0.0    # the class does: its version tag changes
    assert not check(root, {"o": obj})
    del Cfg.shift
    assert check(root, {"o": obj})


def test_a_class_changed_just_before_a_snapshot_is_recorded_still_gets_its_version():
    # A class loses its version tag on every change and gets a new one at its next lookup; a
    # snapshot recorded in between gives it one, so that the instance dict's version covers the
    # attributes below. (An attribute found in an instance dict no fact covers is anchored: it
    # once went unchecked, and `obj.a = 5` was not seen.)
    class Fresh:
        pass

    obj = Holder(a=1, b=2)
    obj.__class__ = Fresh
    root = pinned_root(obj, lambda n: (n.attr("a").add_equals_match(1, "a == 1"),
                                       n.attr("b").add_equals_match(2, "b == 2")))
    Fresh.marker = 1  # no lookup of Fresh after this: no version tag
    assert check(root, {"o": obj}) and check(root, {"o": obj})
    (source, state, n_facts, anchors, kinds), = root.snapshots()
    assert state == "valid" and anchors == [] and kinds == {"type_and_dict": 1}
    obj.a = 5
    assert not check(root, {"o": obj})


def test_parameter_metadata_changed_in_place_is_the_documented_assumption():
    lin = torch.nn.Linear(2, 2)
    w = lin.weight

    def build(n):
        n.attr("_parameters").item("weight").add_tensor_match(
            type(w), w.dtype, w.device, tuple(w.shape), w.stride(), w.requires_grad, "check_tensor(w)")

    skipping, full = pinned_root(lin, build), pinned_root(lin, build, skip=False)
    assert check(skipping, {"o": lin}) and check(full, {"o": lin})
    w.requires_grad_(False)  # in place: no dict changes
    assert check(skipping, {"o": lin}), "skipped, as torch._dynamo skips it by default"
    assert not check(full, {"o": lin})
    w.requires_grad_(True)
    lin.weight = torch.nn.Parameter(torch.randn(3, 2))  # rebinding is always seen
    assert not check(skipping, {"o": lin}) and not check(full, {"o": lin})


def test_exports_come_from_the_check_and_from_an_unchanged_subtree():
    lin = torch.nn.Linear(2, 2)
    root = _C.RootGuardManager()
    node = root.local("o", 0)
    node.add_id_match(lin, "o is lin")
    params = node.attr("_parameters")
    assert root.export(params.item("weight")) == 0 and root.export(params.item("bias")) == 1
    assert root.export(params.item("weight")) == 0  # asked again: the same index
    assert root.export_count == 2
    full = root.check_exports({"o": lin}, G, B)
    assert full[0] is lin.weight and full[1] is lin.bias
    skipped = root.check_exports({"o": lin}, G, B)  # the subtree is skipped now
    assert skipped[0] is lin.weight and skipped[1] is lin.bias
    lin.bias = torch.nn.Parameter(torch.zeros(2))
    again = root.check_exports({"o": lin}, G, B)
    assert again[1] is lin.bias
    assert root.check_exports({"o": torch.nn.Linear(2, 2)}, G, B) is None  # fails: None


def test_a_graph_s_arguments_are_exported_in_a_tuple_of_their_own():
    # With values after a graph's arguments, the arguments come as one tuple (the graph call
    # takes it as it is) ahead of the values, on a full check as on a skipped one.
    lin = torch.nn.Linear(2, 2)
    root = _C.RootGuardManager()
    node = root.local("o", 0)
    node.add_id_match(lin, "o is lin")
    params = node.attr("_parameters")
    for i, child in enumerate((params.item("weight"), params.item("bias"), node.attr("training"))):
        assert root.export(child) == i
    for bad in (0, 3):
        with pytest.raises(ValueError, match="a group of 1 to 2 exports"):
            root.group_exports(bad)
    root.group_exports(2)
    for _ in range(2):  # full, then skipped
        (weight, bias), training = root.check_exports({"o": lin}, G, B)
        assert weight is lin.weight and bias is lin.bias and training is lin.training


# ---- shape checks -------------------------------------------------------------------------------

from pyframe.fake.shapes import CONST, EQ, LE, LOAD  # noqa: E402


def test_shape_match_reads_sizes_straight_from_tensors():
    # `L['b'].size()[1] == L['a'].size()[0]` and `2 <= L['a'].size()[0]`, read from the tensors'
    # own nodes: no node for a size.
    root = _C.RootGuardManager()
    a, b, n = root.local("a", 0), root.local("b", 1), root.local("n", 2)
    root.add_shape_match([b, a], [LOAD, 0, LOAD, 1, EQ], "b1 == a0", [("size", 1), ("size", 0)])
    root.add_shape_match([a], [CONST, 2, LOAD, 0, LE], "2 <= a0", [("size", 0)])
    root.add_shape_match([a, n], [LOAD, 0, LOAD, 1, EQ], "a.stride()[0] == n", [("stride", 0), ("value", 0)])
    assert root.texts() == ["b1 == a0", "2 <= a0", "a.stride()[0] == n"]
    ok = {"a": torch.zeros(5, 3), "b": torch.zeros(2, 5), "n": 3}
    assert check(root, ok)
    assert check(root, {**ok, "a": torch.zeros(7, 3), "b": torch.zeros(4, 7)})
    assert not check(root, {**ok, "b": torch.zeros(2, 6)})                        # the equality
    assert not check(root, {**ok, "a": torch.zeros(1, 3), "b": torch.zeros(2, 1)})  # the bound
    assert not check(root, {**ok, "n": 4})                                         # the int input
    assert not check(root, {**ok, "n": 3.0})                                       # no int
    assert not check(root, {**ok, "b": torch.zeros(5)})                            # no dimension 1
    assert not check(root, {**ok, "b": [[0] * 5] * 2})                             # no tensor
    assert root.first_failure({**ok, "b": torch.zeros(2, 6)}, G, B) == "b1 == a0"
    assert check(root, {**ok, "a": torch.zeros(5, 3)[:, :2]})  # a view: stride 3 as before
    assert not check(root, {**ok, "a": torch.zeros(5, 4)})    # stride 4


def test_shape_match_rejects_bad_reads():
    root = _C.RootGuardManager()
    a = root.local("a", 0)
    with pytest.raises(ValueError, match="one read per node"):
        root.add_shape_match([a], [LOAD, 0], "t", [("size", 0), ("size", 1)])
    with pytest.raises(ValueError, match="'value', 'size' or 'stride'"):
        root.add_shape_match([a], [LOAD, 0], "t", [("length", 0)])
    with pytest.raises(ValueError, match="'value', 'size' or 'stride'"):
        root.add_shape_match([a], [LOAD, 0], "t", [("size", -1)])
