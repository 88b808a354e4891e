"""FakeTensor propagation made cheap: what graph.py uses instead of FakeTensorMode's full dispatch.

`memo.py` remembers an op's output metadata by its inputs' and builds plain FakeTensors directly;
`rules.py` gives the output of the commonest ops on dense tensors from shape rules; `mode.py` is
pyframe's FakeTensorMode, with a short path for views. Each answer is FakeTensorMode's own
(tests/test_fake_*.py compare them). This package knows torch only: no other module of pyframe.
"""
