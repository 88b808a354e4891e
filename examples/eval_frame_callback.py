"""The talk's "dark side" demo: your own eval-frame callback, with no compiler at all.

`pyframe._C.set_eval_frame(callback)` is the bottom of pyframe: from then on every Python frame this
thread evaluates is offered to `callback` (docs/c_layer.md, sections 1 and 2), and it returns the
previous callback, to be put back afterwards. This script

1. logs every frame it sees (`calling foo`), returning None: "run this frame as usual";
2. returns `(code, guards, info)` instead: a cache entry. The next call whose guards pass runs the
   entry's code without asking the callback; a call that fails them asks again;
3. reads the cache entries back (`_C.get_cache_entries`: hits, guard texts) and drops them.

pyframe's own callback (`pyframe.convert_frame.Compiler`) is a longer version of step 2: its code is
the transformed bytecode and its guards are derived from what tracing relied on.

Run:  python examples/eval_frame_callback.py
"""

import types

import torch  # noqa: F401  (pyframe._C links torch's libraries: torch is imported first)

from pyframe import _C


def foo(x, y):
    return x + y


def helper(values):
    return sum(values)


def bar(n):
    return foo(n, 1) * helper([n, n])


def log_frames(frame: "_C.FrameInfo"):
    """Step 1: say which function is called, then let CPython run it as usual."""
    print(f"calling {frame.f_code.co_name}({', '.join(map(repr, frame.f_locals.values()))})")
    return None


def main() -> None:
    print("== 1. a callback that logs every frame ==")
    prior = _C.set_eval_frame(log_frames)
    try:
        result = bar(3)  # three Python frames: bar, foo, helper (sum() is C: no frame)
    finally:
        _C.set_eval_frame(prior)  # always restore, as a `with` block would
    print(f"bar(3) = {result}; the callback is back to {prior!r}\n")

    print("== 2. a callback that makes cache entries ==")
    asked: list[str] = []

    def cache_ints(frame: "_C.FrameInfo"):
        code: types.CodeType = frame.f_code
        if code is not foo.__code__:
            return _C.SKIP  # every other code: never ask again, run it normally
        asked.append(f"foo({', '.join(map(repr, frame.f_locals.values()))})")
        print(f"miss: {asked[-1]}")
        guards = _C.RootGuardManager()
        for index, name in enumerate(code.co_varnames[: code.co_argcount]):
            value = frame.f_locals[name]
            guards.local(name, index).add_type_match(type(value), f"type(L[{name!r}]) is {type(value).__name__}")
        # The entry's code is foo's own here: any code with foo's locals would do (pyframe's is the
        # transformed bytecode that calls the compiled graph).
        return (code, guards, "made by examples/eval_frame_callback.py")

    prior = _C.set_eval_frame(cache_ints)
    try:
        for args in [(1, 2), (3, 4), (5, 6), ("a", "b"), (7, 8), ("c", "d")]:
            print(f"foo{args} = {foo(*args)!r}")
    finally:
        _C.set_eval_frame(prior)
    print(f"the callback was asked {len(asked)} times for 6 calls: {asked}\n")

    print("== 3. the cache entries of foo, most recently hit first ==")
    for entry in _C.get_cache_entries(foo.__code__):
        print(f"{entry!r}: hits={entry.hits}, guards={entry.guards.texts()}, info={entry.info!r}")
    _C.clear_code(foo.__code__)
    print(f"after clear_code: {len(_C.get_cache_entries(foo.__code__))} entries")


if __name__ == "__main__":
    main()
