"""pyframe's hook and torch._dynamo's in one process: both install PEP 523 hooks, in either order,
and each must keep working (pyframe chains to a hook installed before it and only uninstalls
itself while it is still on top)."""
import pytest
import torch
import torch._dynamo

from pyframe import _C


@pytest.fixture(autouse=True)
def clean():
    torch._dynamo.reset()
    _C.set_eval_frame(None)
    yield
    assert _C.set_eval_frame(None) is None
    _C.reset()
    torch._dynamo.reset()
    state = _C._hook_state()
    assert state["installed"] is False and state["active_threads"] == 0


def counting_backend(graphs):
    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return backend


def pf_double(x):
    return x + x


def pf_double_alt(x):
    return ("pyframe", x + x)


def pf_callback(frame):
    if frame.f_code is pf_double.__code__:
        return (pf_double_alt.__code__, _C.RootGuardManager(), None)
    return None


def dyn_body(x):
    return torch.sin(x) + 1


def test_dynamo_inside_pyframe():
    graphs = []
    dyn = torch._dynamo.optimize(counting_backend(graphs))(dyn_body)
    x = torch.randn(4)

    def program(x):
        tag, doubled = pf_double(x)
        return tag, dyn(doubled), pf_double(x)[0]

    run = _C.CallbackScope(program, pf_callback)
    for _ in range(3):
        tag, out, tag2 = run(x)
        assert tag == tag2 == "pyframe"
        torch.testing.assert_close(out, torch.sin(x + x) + 1)
    assert len(graphs) == 1
    assert _C._hook_state()["installed"] is False


def test_pyframe_inside_dynamo():
    graphs = []
    pf_run = _C.CallbackScope(pf_double, pf_callback)

    def body(x):
        y = torch.cos(x)
        tag, z = pf_run(y)  # an unknown C callable for dynamo: a graph break
        return tag, z * 2

    dyn = torch._dynamo.optimize(counting_backend(graphs))(body)
    x = torch.randn(4)
    for _ in range(3):
        tag, out = dyn(x)
        assert tag == "pyframe"
        torch.testing.assert_close(out, (torch.cos(x) + torch.cos(x)) * 2)
    assert len(graphs) >= 1
    assert _C._hook_state()["installed"] is False


def test_pyframe_chains_to_dynamo_while_dynamo_is_active():
    def inner(x):
        return x

    def inner_alt(x):
        return ("pyframe", _C._hook_state(), x + x)

    def callback(frame):
        if frame.f_code is inner.__code__:
            return (inner_alt.__code__, _C.RootGuardManager(), None)
        return None  # everything else goes on to dynamo's hook, below ours

    pf_inner = _C.CallbackScope(inner, callback)

    def body(x):
        return pf_inner(x)

    dyn = torch._dynamo.optimize(counting_backend([]))(body)
    for _ in range(2):
        tag, state, out = dyn(torch.ones(2))
        assert tag == "pyframe"
        assert state["installed"] is True and state["chained"] is True
        torch.testing.assert_close(out, torch.full((2,), 2.0))


def test_set_eval_frame_around_a_dynamo_call():
    graphs = []
    dyn = torch._dynamo.optimize(counting_backend(graphs))(dyn_body)
    x = torch.randn(3)
    seen = []

    def recording(frame):
        seen.append(frame.f_code.co_name)
        return pf_callback(frame)

    _C.set_eval_frame(recording)
    try:
        torch.testing.assert_close(dyn(x), torch.sin(x) + 1)
        assert pf_double(x)[0] == "pyframe"
    finally:
        _C.set_eval_frame(None)
    torch.testing.assert_close(dyn(x), torch.sin(x) + 1)
    assert len(graphs) == 1



_AFTER_DYNAMO_RAISED = """
import torch, pyframe
from pyframe import _C

def f(x):
    def branch(a):
        return a.add_(1).clone()  # (torch.cond's own compile rejects an in-place branch: it raises)
    return torch.cond(x.sum() > 0, branch, lambda a: a - 1, (x.clone(),))

try:
    pyframe.optimize("eager")(f)(torch.ones(3))
except Exception:
    pass
seen = []
def callback(frame):
    seen.append(frame.f_code.co_name)
def g():
    return 1
previous = _C.set_eval_frame(callback)
g()
_C.set_eval_frame(previous)
print(seen)
"""


def test_a_callback_sees_each_frame_once_after_dynamo_raised_inside_a_region():
    """torch._dynamo raising while it compiles inside a pyframe region leaves its hook installed
    above pyframe's and chaining back to it: a frame pyframe hands down the chain comes back to
    pyframe, which runs it without asking its callback a second time."""
    # (in a process of its own: the hooks' state it leaves would carry into the tests after it)
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _AFTER_DYNAMO_RAISED], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "['g']"
