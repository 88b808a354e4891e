"""The C layer's hook, callback protocol and shadow frames (docs/c_layer.md sections 1, 2 and 4).

No translator here: callbacks return hand-made entries whose code is another function's code
with the same local names, so a hit is visible in the result.
"""
import contextlib
import functools
import gc
import sys
import threading
import traceback
import weakref

import pytest

from pyframe import _C


@pytest.fixture(autouse=True)
def clean_hook():
    assert _C.set_eval_frame(None) is None
    yield
    leftover = _C.set_eval_frame(None)
    _C.reset()
    assert leftover is None, "a test left a callback installed"
    assert _C._hook_state()["active_threads"] == 0


def entry_for(fn, alt, guards=None, info=None, log=None):
    """A callback that installs `alt`'s code for frames of `fn` and runs everything else normally."""

    def callback(frame):
        if log is not None:
            log.append(frame.f_code.co_name)
        if frame.f_code is fn.__code__:
            return (alt.__code__, guards if guards is not None else _C.RootGuardManager(), info)
        return None

    return callback


def add(x, y):
    return x + y


def mul(x, y):
    return x * y


# ---- the basic protocol -------------------------------------------------------------------------


def test_hit_runs_transformed_code_and_counts_hits():
    log = []
    run = _C.CallbackScope(add, entry_for(add, mul, info="first", log=log))
    assert run(3, 4) == 12
    assert run(5, 6) == 30
    assert log == ["add"]  # only the miss called back
    (entry,) = _C.get_cache_entries(add.__code__)
    # the call that installed the entry is not a hit: hits counts calls whose guards passed
    assert entry.code is mul.__code__ and entry.info == "first" and entry.hits == 1
    assert isinstance(entry.guards, _C.RootGuardManager)
    assert add(3, 4) == 7  # no callback outside the scope


def test_guards_select_entry_and_most_recent_hit_is_first():
    def alt_int(x, y):
        return ("int", x, y)

    def alt_str(x, y):
        return ("str", x, y)

    def callback(frame):
        if frame.f_code is not add.__code__:
            return None
        root = _C.RootGuardManager()
        tp = type(frame.f_locals["x"])
        root.local("x", 0).add_type_match(tp)
        return ((alt_int if tp is int else alt_str).__code__, root, tp.__name__)

    run = _C.CallbackScope(add, callback)
    assert run(1, 2) == ("int", 1, 2)
    assert run("a", "b") == ("str", "a", "b")
    assert [e.info for e in _C.get_cache_entries(add.__code__)] == ["str", "int"]
    assert run(3, 4) == ("int", 3, 4)
    entries = _C.get_cache_entries(add.__code__)
    assert [(e.info, e.hits) for e in entries] == [("int", 1), ("str", 0)]


def test_frame_info_contents():
    seen = {}

    def cell_arg(a, b=2, *args, k=5, **kw):
        def inner():
            return a

        return inner()

    def callback(frame):
        if frame.f_code is cell_arg.__code__:
            seen.update(
                code=frame.f_code,
                func=frame.f_func,
                globals=frame.f_globals,
                builtins=frame.f_builtins,
                locals=frame.f_locals,
                closure=frame.closure,
            )
            assert frame.f_locals is not frame.f_locals  # a new dict each time
            seen["frame"] = frame
        return None

    assert _C.CallbackScope(cell_arg, callback)(1, 3, 4, x=6) == 1
    assert seen["func"] is cell_arg and seen["code"] is cell_arg.__code__
    assert seen["globals"] is globals() and seen["builtins"]["len"] is len
    # a cell argument holds its raw value at entry (MAKE_CELL has not run); `inner` is unbound
    assert seen["locals"] == {"a": 1, "b": 3, "args": (4,), "k": 5, "kw": {"x": 6}}
    assert seen["closure"] is None
    # kept past the callback: still readable
    assert seen["frame"].f_locals["a"] == 1
    assert "cell_arg" in repr(seen["frame"])


def test_callback_none_result_asks_again():
    log = []
    run = _C.CallbackScope(add, lambda frame: log.append(frame.f_code.co_name))
    assert run(1, 2) == 3 and run(1, 2) == 3
    assert log == ["add", "add"]
    assert _C.get_code_state(add.__code__) == "active"


def test_skip_marks_code_until_reset():
    log = []

    def callback(frame):
        log.append(frame.f_code.co_name)
        return _C.SKIP

    run = _C.CallbackScope(add, callback)
    assert run(1, 2) == 3 and run(2, 2) == 4
    assert log == ["add"]
    assert _C.get_code_state(add.__code__) == "skip"
    _C.reset()
    assert _C.get_code_state(add.__code__) == "active"
    assert run(1, 2) == 3
    assert log == ["add", "add"]


def test_run_only_keeps_entries_and_never_calls_back():
    log = []

    def callback(frame):
        log.append(frame.f_code.co_name)
        if frame.f_code is not add.__code__:
            return None
        if type(frame.f_locals["x"]) is int:
            root = _C.RootGuardManager()
            root.local("x", 0).add_type_match(int)
            return (mul.__code__, root, None)
        return _C.RUN_ONLY

    run = _C.CallbackScope(add, callback)
    assert run(3, 4) == 12
    assert run(3.0, 4.0) == 7.0  # miss -> RUN_ONLY, runs normally
    assert _C.get_code_state(add.__code__) == "run_only"
    assert run(3.0, 4.0) == 7.0 and run(5, 2) == 10
    assert log == ["add", "add"]
    _C.clear_code(add.__code__)
    assert _C.get_code_state(add.__code__) == "active"
    assert _C.get_cache_entries(add.__code__) == []


def test_false_callback_runs_entries_only():
    log = []
    assert _C.CallbackScope(add, entry_for(add, mul, log=log))(2, 5) == 10
    run_only = _C.CallbackScope(add, False)
    assert run_only(2, 5) == 10  # hit
    assert run_only.callback is False

    def other(x, y):
        return x - y

    assert _C.CallbackScope(other, False)(2, 5) == -3  # miss: runs normally, no callback
    assert log == ["add"]


def test_callback_exception_propagates_and_frame_does_not_run():
    ran = []

    def body(x):
        ran.append(x)
        return x

    def callback(frame):
        raise KeyError("from callback")

    with pytest.raises(KeyError, match="from callback"):
        _C.CallbackScope(body, callback)(1)
    assert ran == []
    assert body(2) == 2 and ran == [2]


def test_bad_callback_results_raise():
    with pytest.raises(TypeError, match="must return None, SKIP, RUN_ONLY"):
        _C.CallbackScope(add, lambda f: 42 if f.f_code is add.__code__ else None)(1, 2)
    with pytest.raises(TypeError, match="RootGuardManager"):
        _C.CallbackScope(add, lambda f: (mul.__code__, None, None))(1, 2)
    with pytest.raises(TypeError, match="code object"):
        _C.CallbackScope(add, lambda f: ("nope", _C.RootGuardManager(), None))(1, 2)

    def lacks_y(x, z):
        return x

    with pytest.raises(ValueError, match="lacks the local 'y'"):
        _C.CallbackScope(add, entry_for(add, lacks_y))(1, 2)
    assert _C.get_cache_entries(add.__code__) == []
    with pytest.raises(TypeError):
        _C.set_eval_frame(42)
    with pytest.raises(TypeError):
        _C.CallbackScope(1, None)


def test_set_eval_frame_returns_previous_and_installs_hook():
    def cb(frame):
        return None

    assert _C._hook_state()["installed"] is False
    assert _C.set_eval_frame(cb) is None
    assert _C._hook_state() == {"installed": True, "active_threads": 1, "chained": False}
    assert _C.set_eval_frame(False) is cb
    assert _C.set_eval_frame(None) is False
    assert _C._hook_state()["installed"] is False


# ---- shadow frames ------------------------------------------------------------------------------


def make_closures(k):
    def f(x):
        return x + k

    def f_alt(x):
        return x * k

    return f, f_alt


def test_closure_is_read_from_the_original_function():
    f, _ = make_closures(10)
    _, alt_from_elsewhere = make_closures(1000)
    run = _C.CallbackScope(f, entry_for(f, alt_from_elsewhere))
    assert run(3) == 30  # f's k, not the alt function's


def test_cell_argument_in_shadow():
    def f(x):
        def g():
            return x

        return g()

    def f_alt(x):
        def g():
            return x * 2

        return g()

    run = _C.CallbackScope(f, entry_for(f, f_alt))
    assert run(21) == 42 and run(5) == 10


def test_locals_are_copied_by_name():
    def f(a, b, c):
        return a, b, c

    def f_alt(c, a, b, extra=None):
        # a different order and one more local: slots are mapped by name
        extra = (a, b, c)
        return extra

    def f_alt2(b, c, a):
        t = (a, b, c)
        return t

    run = _C.CallbackScope(f, entry_for(f, f_alt2))
    assert run(1, 2, 3) == (1, 2, 3)
    _C.clear_code(f.__code__)
    assert _C.CallbackScope(f, entry_for(f, f_alt))(1, 2, 3) == (1, 2, 3)


FRAMES = []


def test_exception_in_shadow_has_traceback_and_getframe_works():
    frames = FRAMES

    def f(x):
        return x

    def f_alt(x):
        FRAMES.append(sys._getframe())
        if x < 0:
            raise ValueError("negative")
        return x + 1

    run = _C.CallbackScope(f, entry_for(f, f_alt))
    assert run(1) == 2
    frame = frames[-1]  # outlived its shadow: the data moved into the frame object
    assert frame.f_code is f_alt.__code__
    assert frame.f_locals == {"x": 1}
    assert frame.f_back is not None and frame.f_back.f_code.co_name == "test_exception_in_shadow_has_traceback_and_getframe_works"

    with pytest.raises(ValueError, match="negative") as info:
        run(-1)
    names = [fs.name for fs in traceback.extract_tb(info.value.__traceback__)]
    assert names[-1] == "f_alt"
    assert frames[-1].f_locals == {"x": -1}
    del info
    frames.clear()
    gc.collect()


def test_generators_run_normally():
    log = []

    def gen(n):
        for i in range(n):
            yield i

    def body(n):
        return list(gen(n))

    callback = lambda frame: log.append(frame.f_code.co_name)  # noqa: E731
    assert _C.CallbackScope(body, callback)(3) == [0, 1, 2]
    assert "gen" not in log and "body" in log


def test_recursion_through_shadow_frames():
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    alt = fact.__code__.replace()  # same behavior, distinct code object

    def callback(frame):
        if frame.f_code is fact.__code__:
            return (alt, _C.RootGuardManager(), None)
        return None

    run = _C.CallbackScope(fact, callback)
    assert run(50) == fact(50)
    assert _C.get_cache_entries(fact.__code__)[0].hits == 49  # the first call installed it

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(300)
    try:
        with pytest.raises(RecursionError):
            run(100000)
    finally:
        sys.setrecursionlimit(limit)
    assert run(10) == fact(10)  # the hook and the data stack are still sane


def test_deep_shadow_frames_cross_data_stack_chunks():
    # Large frames force new data-stack chunks (pushed and popped by pf_datastack_push/pop).
    names = ", ".join(f"v{i}=0" for i in range(300))
    ns = {}
    exec(f"def big(n, {names}):\n    return n if n == 0 else big(n - 1)\n", ns)
    exec(f"def big_alt(n, {names}):\n    return n if n == 0 else big(n - 1)\n", ns)
    big, big_alt = ns["big"], ns["big_alt"]
    run = _C.CallbackScope(big, entry_for(big, big_alt))
    for _ in range(3):
        assert run(150) == 0


def shadow_frames():
    return _C._shadow_frames()


def test_entry_code_takes_over_the_frame():
    # The arguments keep their slots in the entry's code: it runs in the frame CPython pushed,
    # with no second frame.
    def f(x, y):
        return x + y

    def f_alt(x, y, extra=None):
        extra = sys._getframe()
        return x * y, extra.f_code, extra.f_back.f_code

    run = _C.CallbackScope(f, entry_for(f, f_alt))
    before = shadow_frames()
    for k in range(3):
        result, code, back = run(3, 4 + k)
        assert result == 3 * (4 + k) and code is f_alt.__code__
        assert back is test_entry_code_takes_over_the_frame.__code__
    assert shadow_frames() == before


def test_moved_arguments_run_in_a_shadow_frame():
    def f(a, b):
        return a - b

    def f_alt(b, a):  # the same names in other slots: copied by name into a new frame
        return (a - b) * 10

    run = _C.CallbackScope(f, entry_for(f, f_alt))
    before = shadow_frames()
    assert [run(5, k) for k in range(3)] == [50, 40, 30]
    assert shadow_frames() == before + 3


def test_take_over_needs_room_on_the_data_stack():
    # An entry code with a large frame, entered at many depths: where the rest of the data-stack
    # chunk cannot hold it, it runs in a shadow frame on a new chunk instead; results and
    # reference counts are the same either way.
    ns = {}
    body = "\n".join(f"    v{i} = n" for i in range(700))
    exec("def f(n, tag):\n    return n\n", ns)
    exec(f"def f_alt(n, tag):\n{body}\n    return (v0 + v699, tag)\n", ns)
    f, f_alt = ns["f"], ns["f_alt"]
    run = _C.CallbackScope(f, entry_for(f, f_alt))

    def at_depth(d, n, tag):
        return run(n, tag) if d == 0 else at_depth(d - 1, n, tag)

    tag = object()
    at_depth(0, 1, tag)
    before_refs, before_shadows = sys.getrefcount(tag), shadow_frames()
    calls = 0
    for depth in range(60):
        for n in range(3):
            assert at_depth(depth, n, tag) == (2 * n, tag)
            calls += 1
    shadows = shadow_frames() - before_shadows
    assert 0 < shadows < calls  # both ways were taken
    assert sys.getrefcount(tag) == before_refs


def test_refcounts_are_stable_on_the_hit_path():
    def f(x, y):
        return x

    def f_alt(x, y):
        return y

    arg, other = object(), object()
    run = _C.CallbackScope(f, entry_for(f, f_alt))
    assert run(arg, other) is other
    before = sys.getrefcount(arg), sys.getrefcount(other)
    for _ in range(100_000):
        run(arg, other)
    assert (sys.getrefcount(arg), sys.getrefcount(other)) == before


# ---- CallbackScope ------------------------------------------------------------------------------


def test_callback_scope_restores_callback_on_error():
    def outer_cb(frame):
        return None

    def boom():
        raise RuntimeError("boom")

    _C.set_eval_frame(outer_cb)
    try:
        with pytest.raises(RuntimeError):
            _C.CallbackScope(boom, None)()
        with pytest.raises(RuntimeError):
            _C.CallbackScope(boom, lambda f: None)()
    finally:
        assert _C.set_eval_frame(None) is outer_cb


def test_callback_scope_sets_and_restores_the_thread_callback():
    seen = []
    cb = lambda frame: None  # noqa: E731

    def probe():
        prev = _C.set_eval_frame(None)  # read the current callback...
        _C.set_eval_frame(prev)  # ...and put it back
        seen.append(prev)

    _C.CallbackScope(probe, cb)()
    _C.CallbackScope(probe, False)()
    _C.CallbackScope(_C.CallbackScope(probe, None), cb)()
    assert seen == [cb, False, None]


def test_callback_scope_as_method_and_wrapper():
    class Model:
        def __init__(self, k):
            self.k = k

        def forward(self, x):
            """doc of forward"""
            return self.k + x

        def forward_alt(self, x):
            return self.k * x

    scope = _C.CallbackScope(Model.forward, entry_for(Model.forward, Model.forward_alt))
    functools.update_wrapper(scope, Model.forward)
    Model.run = scope
    m = Model(3)
    assert m.run(5) == 15  # LOAD_METHOD path
    bound = m.run  # descriptor path
    assert bound(4) == 12 and bound.__self__ is m
    assert Model.run is scope
    assert scope.__name__ == "forward" and scope.__doc__ == "doc of forward"
    assert scope.__wrapped__ is Model.forward
    assert scope.fn is Model.forward and callable(scope.callback)
    assert weakref.ref(scope)() is scope
    assert "CallbackScope" in repr(scope)


def test_callback_scope_keyword_arguments():
    def f(a, *, b=1):
        return a - b

    assert _C.CallbackScope(f, None)(5, b=2) == 3
    assert _C.CallbackScope(fn=f, callback=None)(a=5) == 4


# ---- threads ------------------------------------------------------------------------------------


def test_threads_do_not_share_callbacks():
    def f(x, y):
        return x + y

    def f_alt(x, y):
        return x * y

    barrier = threading.Barrier(2)
    results = {}

    def with_callback():
        run = _C.CallbackScope(f, entry_for(f, f_alt))
        barrier.wait()
        results["with"] = [run(i, 3) for i in range(2000)]

    def without_callback():
        barrier.wait()
        results["without"] = [f(i, 3) for i in range(2000)]

    threads = [threading.Thread(target=with_callback), threading.Thread(target=without_callback)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["with"] == [i * 3 for i in range(2000)]
    assert results["without"] == [i + 3 for i in range(2000)]


@contextlib.contextmanager
def another_active_thread():
    """A thread with a callback of its own for the duration (the hook's other user)."""
    started, stop = threading.Event(), threading.Event()

    def worker():
        _C.set_eval_frame(lambda frame: None)
        started.set()
        stop.wait()
        _C.set_eval_frame(None)

    t = threading.Thread(target=worker)
    t.start()
    started.wait()
    try:
        yield
    finally:
        stop.set()
        t.join()


def test_thread_callbacks_keep_the_hook_installed():
    with another_active_thread():
        assert _C._hook_state()["active_threads"] == 1
        assert _C.CallbackScope(add, False)(1, 2) == 3  # our activity ends, the worker's stays
        assert _C._hook_state()["installed"] is True
    assert _C._hook_state() == {"installed": False, "active_threads": 0, "chained": False}


def test_the_hook_steps_aside_while_the_only_active_thread_compiles():
    # (CPython 3.11 inlines Python-to-Python calls only while no eval function is installed)
    seen = []

    def callback(frame):
        seen.append(_C._hook_state())
        return (mul.__code__, _C.RootGuardManager(), None) if frame.f_code is add.__code__ else None

    assert _C.CallbackScope(add, callback)(3, 4) == 12
    assert seen == [{"installed": False, "active_threads": 1, "chained": False}]
    inside = []
    run = _C.CallbackScope(lambda: (inside.append(_C._hook_state()["installed"]), add(5, 6))[1], callback)
    assert run() == 30  # back in place once the callback returned: the next frame is the hook's
    assert inside == [True]


def test_the_hook_stays_while_another_thread_uses_it_or_a_callback_turns_a_scope_on():
    seen = []

    def callback(frame):
        seen.append(_C._hook_state()["installed"])
        if frame.f_code is add.__code__ and len(seen) == 2:  # a scope of pyframe's inside a compile
            assert _C.CallbackScope(lambda: _C._hook_state()["installed"], lambda f: None)() is True
            seen.append(_C._hook_state()["installed"])
        return None

    with another_active_thread():
        assert _C.CallbackScope(add, callback)(1, 2) == 3  # two active threads: the hook stays
    _C.reset()
    assert _C.CallbackScope(add, callback)(1, 2) == 3  # alone: out, then in for the scope, and kept
    assert seen == [True, False, True]
    assert _C._hook_state() == {"installed": False, "active_threads": 0, "chained": False}


def test_nonlocal_writes_in_shadow_reach_the_enclosing_cell():
    def make():
        count = 0

        def bump(n):
            nonlocal count
            count += n
            return count

        def bump_alt(n):
            nonlocal count
            count += 10 * n
            return count

        return bump, bump_alt, lambda: count

    bump, bump_alt, read = make()
    run = _C.CallbackScope(bump, entry_for(bump, bump_alt))
    assert run(1) == 10 and run(2) == 30 and read() == 30
    assert bump(1) == 31


def test_module_level_code_with_a_locals_mapping():
    code = compile("y = x + 1", "<pyframe-test>", "exec")
    alt = compile("y = x * 100", "<pyframe-test>", "exec")
    seen = []

    def callback(frame):
        if frame.f_code is code:
            seen.append(frame.f_locals)  # no fast locals in module code
            return (alt, _C.RootGuardManager(), None)
        return None

    ns = {"x": 3}
    _C.CallbackScope(exec, callback)(code, ns)
    assert ns["y"] == 300 and seen == [{}]
    _C.CallbackScope(exec, callback)(code, ns)
    assert len(seen) == 1
