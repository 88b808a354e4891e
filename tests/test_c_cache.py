"""The per-code cache of the C layer (docs/c_layer.md section 3): entries, states, clear_code,
reset, and when ExtraStates and entries are freed."""
import gc
import weakref

import pytest

from pyframe import _C


@pytest.fixture(autouse=True)
def clean_hook():
    _C.set_eval_frame(None)
    yield
    assert _C.set_eval_frame(None) is None
    _C.reset()


class Marker:
    pass


def fresh_function(body="return x"):
    """A function whose code object is referenced by nothing but the function."""
    ns = {}
    exec(f"def f(x):\n    {body}\n", ns)
    return ns.pop("f")


def install(fn, alt_code, info=None, guards=None):
    def callback(frame):
        if frame.f_code is fn.__code__:
            return (alt_code, guards if guards is not None else _C.RootGuardManager(), info)
        return None

    return _C.CallbackScope(fn, callback)


def test_code_without_state():
    f = fresh_function()
    assert _C.get_cache_entries(f.__code__) == []
    assert _C.get_code_state(f.__code__) == "active"
    _C.clear_code(f.__code__)  # nothing to clear: fine
    with pytest.raises(TypeError):
        _C.get_cache_entries(f)
    with pytest.raises(TypeError):
        _C.get_code_state("nope")


def test_extra_state_is_freed_with_the_code():
    f = fresh_function()
    alt = fresh_function("return -x")
    marker = Marker()
    ref = weakref.ref(marker)
    assert install(f, alt.__code__, info=marker)(3) == -3
    del marker
    gc.collect()
    assert ref() is not None  # held by the entry's info
    code_ref = weakref.ref(f.__code__)
    del f
    gc.collect()
    assert code_ref() is None
    assert ref() is None  # the code died -> its ExtraState and entries were freed


def test_clear_code_and_reset_drop_entries():
    f, g = fresh_function(), fresh_function()
    alt = fresh_function("return x * 100")
    marks = [Marker(), Marker()]
    refs = [weakref.ref(m) for m in marks]
    assert install(f, alt.__code__, info=marks[0])(2) == 200
    assert install(g, alt.__code__, info=marks[1])(3) == 300
    del marks
    _C.clear_code(f.__code__)
    gc.collect()
    assert refs[0]() is None and refs[1]() is not None
    assert f(2) == 2  # no callback: runs normally
    assert install(f, alt.__code__)(2) == 200  # asks again after clear_code
    _C.reset()
    gc.collect()
    assert refs[1]() is None
    assert _C.get_cache_entries(f.__code__) == [] and _C.get_cache_entries(g.__code__) == []


def test_entry_snapshot_fields():
    f = fresh_function()
    alt = fresh_function("return x + 1")
    guards = _C.RootGuardManager()
    guards.local("x", 0).add_type_match(int)
    run = install(f, alt.__code__, info={"graph": 1}, guards=guards)
    run(1)
    run(2)
    (e,) = _C.get_cache_entries(f.__code__)
    assert e.code is alt.__code__ and e.guards is guards and e.info == {"graph": 1} and e.hits == 1
    assert "hits=1" in repr(e)


def test_guards_that_clear_the_cache_mid_lookup():
    f = fresh_function()
    alt = fresh_function("return ('alt', x)")

    class Clearing:
        armed = False

        def __eq__(self, other):
            if Clearing.armed:
                _C.clear_code(f.__code__)  # frees entries while the hook iterates them
            return True

    guards = _C.RootGuardManager()
    guards.local("x", 0).add_equals_match(Clearing())
    calls = []

    def callback(frame):
        if frame.f_code is f.__code__:
            calls.append(1)
            return (alt.__code__, guards, None)
        return None

    run = _C.CallbackScope(f, callback)
    x = Clearing()
    assert run(x) == ("alt", x) and len(calls) == 1
    assert run(x) == ("alt", x) and len(calls) == 1  # hit
    Clearing.armed = True
    assert run(x) == ("alt", x)  # the hit's entry died mid-lookup: treated as a miss
    assert len(calls) == 2
    Clearing.armed = False
    _C.clear_code(f.__code__)
    gc.collect()


def test_many_codes_reset_and_die():
    fns = [fresh_function(f"return x + {i}") for i in range(50)]
    alt = fresh_function("return 0")
    for fn in fns:
        assert install(fn, alt.__code__, info=Marker())(1) == 0
    del fns[::2]
    gc.collect()
    _C.reset()
    for fn in fns:
        assert _C.get_cache_entries(fn.__code__) == []
        assert fn(1) > 0


# ---- exports: guards hand the values they fetched to the code they guard -----------------------


def reading_exports():
    """A function whose local EXPORTS_LOCAL (never assigned by itself) it returns."""
    return fresh_function(f"if False: {_C.EXPORTS_LOCAL} = None\n    return {_C.EXPORTS_LOCAL}")


def test_exports_reach_the_transformed_code_on_compile_and_on_hits():
    f = fresh_function("return x")
    alt = reading_exports()  # returns what the hook stored
    guards = _C.RootGuardManager()
    box = guards.local("x", 0)
    box.add_type_match(list)
    guards.export(box.item(1))
    guards.export(box)
    run = install(f, alt.__code__, guards=guards)
    first = [0, "a"]
    assert run(first) == ("a", first)      # the miss: checked once to fetch the exports
    second = [1, "b"]
    assert run(second) == ("b", second)    # a hit
    assert [e.hits for e in _C.get_cache_entries(f.__code__)] == [1]


def test_exports_and_the_code_reading_them_must_agree():
    f = fresh_function()
    reads = reading_exports()
    plain = fresh_function("return -x")
    exporting = _C.RootGuardManager()
    exporting.export(exporting.local("x", 0))
    with pytest.raises(ValueError, match="does not read the local"):
        install(f, plain.__code__, guards=exporting)(1)
    with pytest.raises(ValueError, match="reads the local"):
        install(f, reads.__code__, guards=_C.RootGuardManager())(1)
    assert _C.get_cache_entries(f.__code__) == []
