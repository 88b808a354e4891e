"""The fuzzer's statements for protocols a program's state goes through, beyond plain values:

- generators finalized: a generator function whose loop of yields sits in ``try`` with a ``finally``
  block, or an ``except GeneratorExit`` that records and returns a value, taken part way with
  ``next``, maybe across a graph break, then closed (``g.close()``, whose result is read) or dropped
  while paused (``del g``: CPython finalizes it there); what the handler appended (to a list of the
  frame or to ``log``) is read after;
- set tests that take a generator's items, which CPython takes one at a time up to the item that
  decides (``{a, b}.isdisjoint(gen)``, ``frozenset(...).issuperset(gen)``), the generator recording
  each item it gives; what is left in it is counted after;
- keyword-only parameters with defaults (``*, k_opt=2, s_opt=0.5, m_opt=None``) on helpers (some
  passed by keyword at each call, the others left to their defaults) and on ``fuzz_main`` (always
  left to their defaults); a tensor one defaults to None and is made when not given (``if m_opt is
  None: m_opt = ...``, a library's ``attention_mask=None``), maybe after a graph break;
- a dict passed in (``d0``, fixed keys): its entries are variables of the scope (``d0["k"]``, read,
  rebound, updated in place), and its methods are called (``get``, ``setdefault``, ``update``, ``pop``
  then the key put back, ``in``, ``len``); the runner compares it after the call.

A mixin of ``ProgramGenerator`` (generator.py), like ``ExpressionWriter``.
"""
from __future__ import annotations

from .program import FLOAT, FLOAT_CONSTS, INT, DictT, Keyword, Param, Scope, SeqT, TensorT, VType


class ProtocolStatements:
    """Statements and signatures over generators, set tests, keyword-only parameters and a dict."""

    # -- keyword-only and defaulted parameters ---------------------------------------------------
    def keywords(self) -> tuple[Keyword, ...]:
        """Keyword-only parameters for the function being written: none, or one to three."""
        if not self.chance(0.4):
            return ()
        self.use("kwonly_default")
        found = []
        if self.chance(0.6):
            found.append(Keyword("k_opt", INT, str(self.rng.randint(0, 3))))
        if self.chance(0.5):
            found.append(Keyword("s_opt", FLOAT, str(self.pick(FLOAT_CONSTS))))
        if self.chance(0.5) or not found:
            found.append(Keyword("m_opt", TensorT(self.pick(self.shapes)), "None"))
        return tuple(found)

    @staticmethod
    def keyword_signature(keywords: tuple[Keyword, ...]) -> list[str]:
        return ["*", *[f"{k.name}={k.default}" for k in keywords]] if keywords else []

    @staticmethod
    def keyword_vars(keywords: tuple[Keyword, ...]) -> dict[str, VType]:
        """The keyword parameters the body sees at once (a None-defaulted one after the prologue)."""
        return {k.name: k.type for k in keywords if k.default != "None"}

    def write_keyword_prologue(self, scope: Scope, keywords: tuple[Keyword, ...]) -> None:
        """`if m_opt is None: m_opt = ...`: a tensor parameter made when the caller gave none."""
        for k in keywords:
            if k.default != "None":
                continue
            self.use("none_default")
            if self.chance(0.3):
                self.use("graph_break")
                self.emit("torch._dynamo.graph_break()")
            with self.block(f"if {k.name} is None:"):
                self.emit(f"{k.name} = {self.tensor_expr(scope, k.type.shape, 2)}")
            scope.vars[k.name] = k.type

    def keyword_arguments(self, scope: Scope, keywords: tuple[Keyword, ...]) -> list[str]:
        """Some keyword parameters passed (in any order), the others left to their defaults."""
        given = [k for k in keywords if self.chance(0.5)]
        self.rng.shuffle(given)
        return [f"{k.name}={self.value_expr(scope, k.type, 1)}" for k in given]

    # -- generators finalized --------------------------------------------------------------------
    def stmt_gen_close(self, scope: Scope) -> None:
        if not scope.tensors():
            return self.stmt_new_tensor(scope)
        name, t = self.pick(scope.tensors())
        gen, g = self.fresh("gen"), self.fresh("g")
        to_log = scope.takes_log and self.chance(0.3)
        out = "log" if to_log else self.fresh("out")
        if not to_log:
            self.emit(f"{out} = []")
        count = self.rng.randint(2, 3)
        in_finally = self.chance(0.5)
        with self.block(f"def {gen}(a, out):"):
            with self.block("try:"):
                with self.block(f"for k in range({count}):"):
                    self.emit("yield a * k + 1")
            if in_finally:
                self.use("gen_finally")
                with self.block("finally:"):
                    self.emit("out.append(a.sum())")
            else:
                self.use("gen_exit_return")
                with self.block("except GeneratorExit:"):
                    self.emit("out.append(len(out))")
                    self.emit("return 7")
        self.emit(f"{g} = {gen}({name}, {out})")
        taken = self.rng.randint(0, count)
        for _ in range(taken):
            item = self.fresh("t")
            self.emit(f"{item} = next({g})")
            scope.vars[item] = t
        if self.chance(0.25):
            self.use("graph_break")  # a paused generator live across the break
            self.emit("torch._dynamo.graph_break()")
        if self.chance(0.2):
            self.use("gen_dropped")
            self.emit(f"del {g}")  # its last reference: CPython runs the handler here
        else:
            self.use("gen_close")
            closed, new = self.fresh("c"), self.fresh("n")
            self.emit(f"{closed} = {g}.close()")
            self.emit(f"{new} = len({out}) + ({closed} is None)")
            scope.vars[new] = INT
        if not to_log and taken and scope.top_level:  # the handler ran: one item, known
            scope.vars[out] = SeqT("list", (TensorT(()) if in_finally else INT,))

    def stmt_gen_set_test(self, scope: Scope) -> None:
        """A set test over a generator that records what it gives: CPython stops at the deciding item."""
        self.use("gen_set_test")
        gen, seen, g, new = self.fresh("gen"), self.fresh("seen"), self.fresh("g"), self.fresh("n")
        self.emit(f"{seen} = []")
        with self.block(f"def {gen}(values, seen):"):
            with self.block("for v in values:"):
                self.emit("seen.append(v)")
                self.emit("yield v")
        values = [self.number_expr(scope, INT, 1) for _ in range(self.rng.randint(2, 4))]
        members = [self.number_expr(scope, INT, 0) for _ in range(self.rng.randint(1, 3))]
        receiver = "{" + ", ".join(members) + "}"
        if self.chance(0.4):
            receiver = f"frozenset({receiver})"
        method = self.pick(["isdisjoint", "issuperset"])
        self.emit(f"{g} = {gen}(({', '.join(values)},), {seen})")
        self.emit(f"{new} = int({receiver}.{method}({g})) + 10 * len({seen}) + 100 * len(list({g}))")
        scope.vars[new] = INT

    # -- a dict passed in --------------------------------------------------------------------------
    def dict_param(self) -> Param:
        return Param("d0", DictT((("k", INT), ("s", FLOAT), ("w", TensorT(self.pick(self.shapes[1:]))))))

    @staticmethod
    def dict_vars(param: Param) -> dict[str, VType]:
        """`d0` and its entries, each a variable of the scope (`d0["k"]`)."""
        return {param.name: param.type, **{f'{param.name}["{key}"]': t for key, t in param.type.items}}

    def stmt_dict_method(self, scope: Scope) -> None:
        dicts = [(n, t) for n, t in scope.vars.items() if isinstance(t, DictT)]
        if not dicts:
            return self.stmt_number(scope)
        name, d = self.pick(dicts)
        types = dict(d.items)
        self.use("dict_method")
        roll = self.rng.random()
        if roll < 0.3:
            new = self.fresh("n")
            self.emit(f'{new} = {name}.get("k", 0) + len({name}) + ("w" in {name}) + ("z" in {name})')
            scope.vars[new] = INT
        elif roll < 0.5:
            key = self.pick(["k", "s"])
            value = self.number_expr(scope, types[key], 1)
            self.emit(f"{name}.update({key}={value})" if self.chance(0.5) else f'{name}.update({{"{key}": {value}}})')
        elif roll < 0.7:
            new = self.fresh("f")
            self.emit(f'{new} = {name}.setdefault("s", {self.pick(FLOAT_CONSTS)}) * 2')
            scope.vars[new] = FLOAT
        else:
            # out and back in: the key moves to the end, the value may be another tensor
            new = self.fresh("t")
            self.emit(f'{new} = {name}.pop("w")')
            scope.vars[new] = types["w"]
            self.emit(f'{name}["w"] = {self.tensor_expr(scope, types["w"].shape, 1)}')
