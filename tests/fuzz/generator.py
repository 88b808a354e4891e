"""Write a random small PyTorch program from a seed, as Python source text.

A program is a module: ``import torch``, a few helper functions, and the entry function
``fuzz_main(t0, t1, ..., n0, f0, log)``. The generator types every value while it writes it
(a tensor's exact shape, int, float, a list or tuple of known items), so an expression is only
written where it is valid: shapes agree for arithmetic and ``@``, an index is in range, an
in-place op's operand broadcasts to its target. What it writes:

- tensor arithmetic (``+ - * /`` with a safe divisor), ``torch.sin/cos/exp/relu/tanh``, ``@``,
  ``.t()``, indexing, ``torch.stack``; reductions (``sum/mean/max``, whole or over a dim);
- Python ints and floats (parameters, loop variables, ``len``, ``.shape[d]``, ``.item()``);
- lists and tuples (build, index, unpack, ``append`` on a local list, ``for`` over a list);
- ``if`` / ``else`` on tensor values (a graph break) and on Python values; ternaries; ``and`` / ``or``;
- ``for i in range(k)``; calls to the helpers (which may call earlier helpers); early returns;
- in-place ops (``add_``, ``mul_``, ``+=``), aliases (``t3 = t1``);
- ``log.append(...)`` of numbers and tensors: a side effect on a list that outlives the call;
- slices of lists and tuples (the argument ``l0`` included); comprehensions that make a tensor
  local a cell, then ``torch._dynamo.graph_break()``, then the cell copied and rebound; nested
  generators whose ``yield from`` uses the sub-generator's return value; ``math.copysign`` of a
  float (the inputs include ``0.0`` and ``-0.0``);
- closures: a nested function reading a tensor local (a cell), called after a break and after the
  cell was rebound, or one that rebinds an int local with ``nonlocal``; comprehensions whose body
  breaks the graph (a branch on a tensor inside the comprehension);
- a module-level object ``cfg`` whose attributes (an int, a float, a tensor) the runner sets anew
  before each call (so they change between calls, on the same object) and the program reads and
  sets (``cfg.k += 1``, ``cfg.w = ...``, ``cfg.w.add_(...)``): the runner compares them afterwards;
- (protocols.py) generators closed part way or dropped paused, whose ``finally`` or ``except
  GeneratorExit`` records something; set tests over generators (``isdisjoint``, ``issuperset``);
  keyword-only parameters with defaults (a tensor one ``=None``, made when not given); a dict passed
  in (``d0``) whose entries are read and written like variables and whose methods are called.

A block (``if`` arm, loop body) may read and rebind the variables around it with values of the same
type, but what it defines is forgotten after it, and it never changes a list's length, so the types
known after a block hold on every path. Whether a program runs without error (or nan/inf) is checked
by running it (runner.py); the generator only makes such failures rare.
"""
from __future__ import annotations

import random
from contextlib import contextmanager
from typing import Iterator

from .expressions import ExpressionWriter
from .program import (FEATURES, FLOAT, INT, MAX_BLOCK_DEPTH, MAX_EXPR_DEPTH, DictT, FloatT, Helper, IntT, Param,
                      Program, Scope, SeqT, TensorT, VType, is_plain_name)
from .protocols import ProtocolStatements

__all__ = ["FEATURES", "FLOAT", "INT", "DictT", "FloatT", "Helper", "IntT", "Param", "Program", "Scope", "SeqT",
           "TensorT", "VType", "ProgramGenerator", "generate_program"]


class ProgramGenerator(ExpressionWriter, ProtocolStatements):
    """One program from one (seed, attempt): ``ProgramGenerator(seed).generate()``."""

    def __init__(self, seed: int, attempt: int = 0):
        self.seed = seed
        self.rng = random.Random(f"pyframe-fuzz:{seed}:{attempt}")
        dims = self.rng.sample([2, 3, 4, 5], 3)
        a, b, c = dims
        self.dims = dims
        self.shapes: list[tuple[int, ...]] = [(), (a,), (b,), (a, b), (b, c)]
        self.helpers: list[Helper] = []
        self.features: set[str] = set()
        self.lines: list[str] = []
        self.indent = 0
        self.counter = 0

    # -- output --------------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        self.emit(header)
        self.indent += 1
        mark = len(self.lines)
        yield
        if len(self.lines) == mark:
            self.emit("pass")
        self.indent -= 1

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def use(self, feature: str) -> None:
        assert feature in FEATURES, feature
        self.features.add(feature)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, items):
        return self.rng.choice(list(items))

    # -- the program -----------------------------------------------------------------------------
    def generate(self) -> Program:
        self.emit('"""A program written by tests/fuzz/generator.py."""')
        self.emit("import math")
        self.emit("import torch")
        self.emit("")
        self.state: tuple[Param, ...] = ()
        if self.chance(0.3):
            # Attributes the runner sets anew before each call: read and written by the program as
            # `cfg.k`, like a variable of the scope (never a loop variable, never a cell).
            self.use("attr_state")
            self.state = (Param("k", INT), Param("scale", FLOAT), Param("w", TensorT(self.pick(self.shapes[1:]))))
            self.emit("")
            self.emit("class Config:")
            self.emit("    pass")
            self.emit("")
            self.emit("")
            self.emit("cfg = Config()")
        for index in range(self.rng.randint(0, 2)):
            self.write_helper(f"helper_{index}")
        params = [Param(f"t{i}", TensorT(self.pick(self.shapes[1:]))) for i in range(self.rng.randint(1, 3))]
        params += [Param("n0", INT), Param("f0", FLOAT), Param("l0", SeqT("list", (INT, INT, INT)))]
        entries: dict[str, VType] = {}
        if self.chance(0.3):
            self.use("dict_state")
            params.append(self.dict_param())
            entries = self.dict_vars(params[-1])
        keywords = self.keywords()  # never passed by the runner: their defaults, every call
        self.counter = 0
        signature = ", ".join([p.name for p in params] + ["log"] + self.keyword_signature(keywords))
        scope = Scope({**self.state_vars(), **{p.name: p.type for p in params}, **entries,
                       **self.keyword_vars(keywords)}, True, 0, True, None)
        self.emit("")
        with self.block(f"def fuzz_main({signature}):"):
            self.write_keyword_prologue(scope, keywords)
            self.write_body(scope, self.rng.randint(3, 8))
            self.write_return(scope)
        source = "\n".join(self.lines) + "\n"
        return Program(self.seed, source, tuple(params), frozenset(self.features), state=self.state)

    def state_vars(self) -> dict[str, VType]:
        return {f"cfg.{p.name}": p.type for p in self.state}

    def write_helper(self, name: str) -> None:
        params = [Param(f"a{i}", self.random_param_type()) for i in range(self.rng.randint(1, 3))]
        if not any(isinstance(p.type, TensorT) for p in params):
            params[0] = Param("a0", TensorT(self.pick(self.shapes)))
        takes_log = self.chance(0.5)
        returns: VType = TensorT(self.pick(self.shapes))
        if self.chance(0.25):
            returns = SeqT("tuple", (returns, self.pick([INT, FLOAT])))
        keywords = self.keywords()
        helper = Helper(name, tuple(params), returns, takes_log, keywords)
        self.counter = 0
        signature = ", ".join([p.name for p in params] + (["log"] if takes_log else [])
                              + self.keyword_signature(keywords))
        scope = Scope({**self.state_vars(), **{p.name: p.type for p in params}, **self.keyword_vars(keywords)},
                      True, 0, takes_log, returns)
        self.emit("")
        with self.block(f"def {name}({signature}):"):
            self.write_keyword_prologue(scope, keywords)
            self.write_body(scope, self.rng.randint(1, 4))
            self.emit(f"return {self.value_expr(scope, returns, 2)}")
        self.helpers.append(helper)  # after its body: a helper calls only earlier helpers

    def random_param_type(self) -> VType:
        roll = self.rng.random()
        if roll < 0.65:
            return TensorT(self.pick(self.shapes))
        return INT if roll < 0.85 else FLOAT

    def write_return(self, scope: Scope) -> None:
        names = list(scope.vars)
        chosen = self.rng.sample(names, min(len(names), self.rng.randint(1, 4)))
        if len(chosen) == 1 and self.chance(0.5):
            self.emit(f"return {chosen[0]}")
        else:
            self.emit(f"return ({', '.join(chosen)},)")

    # -- statements ------------------------------------------------------------------------------
    def write_body(self, scope: Scope, count: int) -> None:
        for _ in range(count):
            self.write_statement(scope)

    def write_statement(self, scope: Scope) -> None:
        can_nest = scope.depth < MAX_BLOCK_DEPTH
        options = [
            (6, self.stmt_new_tensor),
            (3, self.stmt_rebind_tensor),
            (2, self.stmt_number),
            (2, self.stmt_inplace),
            (2, self.stmt_container),
            (1, self.stmt_alias),
            (2, self.stmt_residual),
            (2 if scope.takes_log else 0, self.stmt_log_append),
            (3 if can_nest else 0, self.stmt_if),
            (2 if can_nest else 0, self.stmt_for_range),
            (1 if can_nest else 0, self.stmt_for_list),
            (2 if self.helpers else 0, self.stmt_helper_call),
            (1 if scope.top_level else 0, self.stmt_list_append),
            (1, self.stmt_slice),
            (1, self.stmt_closure_break),
            (1, self.stmt_yield_from),
            (1, self.stmt_closure_call),
            (1, self.stmt_comprehension_break),
            (1, self.stmt_gen_close),
            (1, self.stmt_gen_set_test),
            (1, self.stmt_dict_method),
        ]
        self.weighted(options)(scope)

    def assignable(self, scope: Scope, want: VType) -> list[str]:
        return [n for n in scope.names(want) if n not in scope.frozen]

    def stmt_new_tensor(self, scope: Scope) -> None:
        shape = self.pick(self.shapes)
        name = self.fresh("t")
        self.emit(f"{name} = {self.tensor_expr(scope, shape, MAX_EXPR_DEPTH)}")
        scope.vars[name] = TensorT(shape)

    def stmt_rebind_tensor(self, scope: Scope) -> None:
        targets = [(n, t) for n, t in scope.tensors() if n not in scope.frozen]
        if not targets:
            return self.stmt_new_tensor(scope)
        name, t = self.pick(targets)
        if self.chance(0.3):
            self.use("aug_assign")  # `t += ...` on a tensor is in place: other names of it see it
            op = self.pick(["+=", "-=", "*="])
            self.emit(f"{name} {op} {self.operand_for(scope, t.shape, 2)}")
        else:
            self.emit(f"{name} = {self.tensor_expr(scope, t.shape, MAX_EXPR_DEPTH)}")

    def stmt_number(self, scope: Scope) -> None:
        kind = self.pick([INT, FLOAT])
        existing = self.assignable(scope, kind)
        if existing and self.chance(0.4):
            name = self.pick(existing)
            self.use("aug_assign")
            self.emit(f"{name} += {self.number_expr(scope, kind, 1)}")
            return
        if kind == FLOAT and scope.tensors() and self.chance(0.3):
            self.use("item")
            name, t = self.pick(scope.tensors())
            value = f"{name}.{self.pick(['sum', 'mean'])}().item()"
        else:
            value = self.number_expr(scope, kind, 2)
        new = self.fresh("n" if kind == INT else "f")
        self.emit(f"{new} = {value}")
        scope.vars[new] = kind

    def stmt_inplace(self, scope: Scope) -> None:
        targets = [(n, t) for n, t in scope.tensors() if n not in scope.frozen]
        if not targets:
            return self.stmt_new_tensor(scope)
        name, t = self.pick(targets)
        self.use("inplace")
        method = self.pick(["add_", "mul_", "sub_"])
        self.emit(f"{name}.{method}({self.operand_for(scope, t.shape, 2)})")

    def stmt_alias(self, scope: Scope) -> None:
        if not scope.tensors():
            return self.stmt_new_tensor(scope)
        name, t = self.pick(scope.tensors())
        self.use("alias")
        new = self.fresh("t")
        self.emit(f"{new} = {name}")
        scope.vars[new] = t

    def stmt_residual(self, scope: Scope) -> None:
        """`res = x; x = f(x); x = res + g(x)`: the old tensor stays live under a second name while
        the first is rebound, and waits on the value stack while g (maybe a break) runs."""
        targets = [(n, t) for n, t in scope.tensors() if n not in scope.frozen]
        if not targets:
            return self.stmt_new_tensor(scope)
        name, t = self.pick(targets)
        self.use("residual")
        res = self.fresh("res")
        self.emit(f"{res} = {name}")
        self.emit(f"{name} = {self.tensor_expr(scope, t.shape, 2)}")
        scope.vars[res] = t
        op = self.pick(["+", "-", "*"])
        self.emit(f"{name} = {res} {op} {self.tensor_expr(scope, t.shape, 2)}")

    def stmt_log_append(self, scope: Scope) -> None:
        self.use("log_append")
        roll = self.rng.random()
        if roll < 0.4 and scope.tensors():
            name, _ = self.pick(scope.tensors())
            value = name  # the tensor itself: later in-place updates show in the log too
        elif roll < 0.6:
            shape = self.pick(self.shapes)
            value = self.tensor_expr(scope, shape, 2)
        else:
            value = self.number_expr(scope, self.pick([INT, FLOAT]), 2)
        self.emit(f"log.append({value})")

    def stmt_container(self, scope: Scope) -> None:
        seqs = scope.seqs()
        roll = self.rng.random()
        if seqs and roll < 0.45:
            name, seq = self.pick(seqs)
            tensors = [i for i, item in enumerate(seq.items) if isinstance(item, TensorT)]
            if len(set(seq.items)) == 1 and isinstance(seq.items[0], TensorT) and self.chance(0.3):
                self.use("stack")
                new = self.fresh("t")
                self.emit(f"{new} = torch.stack({name})")
                scope.vars[new] = TensorT((len(seq.items), *seq.items[0].shape))
            elif 2 <= len(seq.items) <= 3 and self.chance(0.5):
                self.use("unpack")
                names = [self.fresh("v") for _ in seq.items]
                self.emit(f"{', '.join(names)} = {name}")
                scope.vars.update(zip(names, seq.items))
            else:
                self.use("index")
                i = self.rng.randrange(len(seq.items))
                if tensors and self.chance(0.6):
                    i = self.pick(tensors)
                new = self.fresh("v")
                index = i if self.chance(0.7) else i - len(seq.items)
                self.emit(f"{new} = {name}[{index}]")
                scope.vars[new] = seq.items[i]
            return
        kind = self.pick(["list", "tuple"])
        self.use(kind)
        if self.chance(0.6):
            shape = self.pick(self.shapes)
            items: tuple[VType, ...] = tuple(TensorT(shape) for _ in range(self.rng.randint(1, 3)))
        else:
            items = tuple(self.pick([TensorT(self.pick(self.shapes)), INT, FLOAT])
                          for _ in range(self.rng.randint(1, 3)))
        texts = [self.value_expr(scope, item, 2) for item in items]
        new = self.fresh("seq")
        if kind == "list":
            self.emit(f"{new} = [{', '.join(texts)}]")
        else:
            self.emit(f"{new} = ({', '.join(texts)},)")
        scope.vars[new] = SeqT(kind, items)

    def stmt_slice(self, scope: Scope) -> None:
        seqs = [(n, s) for n, s in scope.seqs() if len(s.items) >= 2]
        if not seqs:
            return self.stmt_container(scope)
        name, seq = self.pick(seqs)
        self.use("list_slice")
        start = self.rng.randint(1, len(seq.items) - 1)
        new = self.fresh("seq")
        self.emit(f"{new} = {name}[{start}:]")
        scope.vars[new] = SeqT(seq.kind, seq.items[start:])

    def stmt_closure_break(self, scope: Scope) -> None:
        """`c = [t * k for k in range(2)]` makes t a cell; a break; then `old = t; t = ...`."""
        targets = [(n, t) for n, t in scope.tensors() if n not in scope.frozen]
        if not targets:
            return self.stmt_new_tensor(scope)
        name, t = self.pick(targets)
        self.use("closure_comprehension")
        k, seq = self.fresh("k"), self.fresh("seq")
        self.emit(f"{seq} = [{name} * {k} for {k} in range(2)]")
        scope.vars[seq] = SeqT("list", (t, t))
        if self.chance(0.6):
            self.use("graph_break")
            self.emit("torch._dynamo.graph_break()")
        self.use("cell_rebind")
        old = self.fresh("old")
        self.emit(f"{old} = {name}")
        scope.vars[old] = t
        self.emit(f"{name} = {self.tensor_expr(scope, t.shape, 2)}")

    def stmt_closure_call(self, scope: Scope) -> None:
        """A nested function over a local (made a cell): maybe a break, maybe the cell rebound,
        then the call, which sees the cell's value at the call. Or a counter: `nonlocal n; n += k`."""
        ints = [n for n in self.assignable(scope, INT) if is_plain_name(n)]
        if ints and self.chance(0.3):
            name = self.pick(ints)
            self.use("nonlocal_closure")
            fn = self.fresh("bump")
            with self.block(f"def {fn}(k):"):
                self.emit(f"nonlocal {name}")
                self.emit(f"{name} += k")
                self.emit(f"return {name}")
            if self.chance(0.5):
                self.use("graph_break")
                self.emit("torch._dynamo.graph_break()")
            new = self.fresh("n")
            self.emit(f"{new} = {fn}({self.rng.randint(1, 3)}) + {name}")
            scope.vars[new] = INT
            return
        targets = [(n, t) for n, t in scope.tensors() if n not in scope.frozen and is_plain_name(n)]
        if not targets:
            return self.stmt_new_tensor(scope)
        name, t = self.pick(targets)
        self.use("closure_call")
        fn, new = self.fresh("clo"), self.fresh("t")
        with self.block(f"def {fn}(a):"):
            self.emit(f"return a * {name} + 1")
        if self.chance(0.5):
            self.use("graph_break")
            self.emit("torch._dynamo.graph_break()")
        if self.chance(0.5):
            self.use("cell_rebind")
            self.emit(f"{name} = {self.tensor_expr(scope, t.shape, 2)}")
        self.emit(f"{new} = {fn}({self.tensor_expr(scope, t.shape, 1)})")
        scope.vars[new] = t

    def stmt_comprehension_break(self, scope: Scope) -> None:
        """A comprehension whose body branches on a tensor: the break is inside the comprehension's
        own frame (inlined), over a sequence of known length."""
        if not scope.tensors():
            return self.stmt_new_tensor(scope)
        name, t = self.pick(scope.tensors())
        self.use("comprehension_break")
        var, new = self.fresh("x"), self.fresh("seq")
        items = [name, self.tensor_expr(scope, t.shape, 1)]
        threshold = self.pick([0, 0.5, -0.5])
        self.emit(f"{new} = [({var} * 2 if {var}.sum() > {threshold} else {var} - 1) for {var} in "
                  f"({', '.join(items)})]")
        scope.vars[new] = SeqT("list", (t, t))

    def stmt_yield_from(self, scope: Scope) -> None:
        """Nested generators: the outer one yields what `yield from` the inner one returned."""
        if not scope.tensors():
            return self.stmt_new_tensor(scope)
        name, t = self.pick(scope.tensors())
        self.use("yield_from")
        inner, outer, new = self.fresh("gen"), self.fresh("gen"), self.fresh("seq")
        with self.block(f"def {inner}(a):"):
            self.emit("yield a * 2")
            self.emit("return a + 1")
        with self.block(f"def {outer}(a):"):
            self.emit(f"r = yield from {inner}(a)")
            self.emit("yield r")
        self.emit(f"{new} = list({outer}({name}))")
        scope.vars[new] = SeqT("list", (t, t))

    def stmt_list_append(self, scope: Scope) -> None:
        lists = [(n, s) for n, s in scope.seqs() if s.kind == "list" and n not in scope.frozen]
        if not lists:
            return self.stmt_container(scope)
        name, seq = self.pick(lists)
        self.use("list_append")
        item = seq.items[0] if self.chance(0.7) else self.pick([INT, FLOAT, TensorT(self.pick(self.shapes))])
        self.emit(f"{name}.append({self.value_expr(scope, item, 2)})")
        scope.vars[name] = SeqT("list", seq.items + (item,))

    def stmt_if(self, scope: Scope) -> None:
        cond = self.condition(scope, 2)
        with self.block(f"if {cond}:"):
            inner = scope.child()
            self.write_body(inner, self.rng.randint(1, 3))
            if scope.top_level and self.chance(0.2):
                self.use("early_return")
                self.write_early_return(inner)
        if self.chance(0.5):
            with self.block("else:"):
                self.write_body(scope.child(), self.rng.randint(1, 3))

    def write_early_return(self, scope: Scope) -> None:
        if scope.returns is None:
            self.write_return(scope)
        else:
            self.emit(f"return {self.value_expr(scope, scope.returns, 2)}")

    def stmt_for_range(self, scope: Scope) -> None:
        self.use("for_range")
        var = self.fresh("i")
        bound = str(self.rng.randint(1, 3))
        ints = scope.names(INT)
        if ints and self.chance(0.3):
            bound = f"min({self.pick(ints)}, 3)"  # a Python int decides the trip count
        with self.block(f"for {var} in range({bound}):"):
            self.write_body(scope.child({var: INT}, {var}), self.rng.randint(1, 3))

    def stmt_for_list(self, scope: Scope) -> None:
        seqs = [(n, s) for n, s in scope.seqs() if len(set(s.items)) == 1 and isinstance(s.items[0], TensorT)]
        if not seqs:
            return self.stmt_for_range(scope)
        name, seq = self.pick(seqs)
        self.use("for_list")
        var = self.fresh("item")
        with self.block(f"for {var} in {name}:"):
            self.write_body(scope.child({var: seq.items[0]}, {var}), self.rng.randint(1, 3))

    def stmt_helper_call(self, scope: Scope) -> None:
        helper = self.pick(self.helpers)
        call = self.call_text(scope, helper)
        returns = helper.returns
        if isinstance(returns, SeqT) and self.chance(0.6):
            self.use("unpack")
            names = [self.fresh("v") for _ in returns.items]
            self.emit(f"{', '.join(names)} = {call}")
            scope.vars.update(zip(names, returns.items))
        else:
            new = self.fresh("r")
            self.emit(f"{new} = {call}")
            scope.vars[new] = returns

    def call_text(self, scope: Scope, helper: Helper) -> str:
        self.use("helper_call")
        if scope.returns is not None:
            self.use("nested_helper_call")  # a helper calling a helper
        args = [self.value_expr(scope, p.type, 1) for p in helper.params]
        if helper.takes_log:
            # Inside a helper without a log, the callee gets a list of its own (still a side effect
            # on a list it does not own).
            args.append("log" if scope.takes_log else "[]")
        names = [p.name for p in helper.params] + (["log"] if helper.takes_log else [])
        if self.chance(0.3):  # the last arguments by keyword: KW_NAMES before the CALL
            self.use("keyword_call")
            first_keyword = self.rng.randrange(len(args))
            args = args[:first_keyword] + [f"{n}={a}" for n, a in zip(names[first_keyword:], args[first_keyword:])]
        args += self.keyword_arguments(scope, helper.keywords)
        return f"{helper.name}({', '.join(args)})"



def generate_program(seed: int, attempt: int = 0) -> Program:
    """The program of (seed, attempt): the same text every time, on every machine."""
    return ProgramGenerator(seed, attempt).generate()
