"""The fuzzer's expression writer: typed tensor, number and sequence expressions and conditions.

A mixin of ``ProgramGenerator`` (generator.py): it reads the generator's random source, shapes and
helpers, and records the features it uses.
"""
from __future__ import annotations

from .program import FLOAT, FLOAT_CONSTS, INT, UNARY, Scope, SeqT, T, TensorT, VType, fmt_shape, numel


class ExpressionWriter:
    """Expressions of a wanted type, valid where they are written."""

    # -- expressions -----------------------------------------------------------------------------
    def value_expr(self, scope: Scope, want: VType, depth: int) -> str:
        if isinstance(want, TensorT):
            return self.tensor_expr(scope, want.shape, depth)
        if isinstance(want, SeqT):
            texts = [self.value_expr(scope, item, depth - 1) for item in want.items]
            if want.kind == "tuple":
                return f"({', '.join(texts)},)"
            return f"[{', '.join(texts)}]"
        return self.number_expr(scope, want, depth)

    def operand_for(self, scope: Scope, shape: tuple[int, ...], depth: int) -> str:
        """Something that broadcasts to `shape` (for in-place ops): same shape, 0-d, or a number."""
        roll = self.rng.random()
        if roll < 0.55:
            return self.tensor_expr(scope, shape, depth)
        if roll < 0.7:
            return self.tensor_expr(scope, (), depth)
        return self.number_expr(scope, self.pick([INT, FLOAT]), depth)

    def leaf_tensor(self, scope: Scope, shape: tuple[int, ...]) -> str:
        names = scope.names(TensorT(shape))
        if names and self.chance(0.85):
            return self.pick(names)
        roll = self.rng.random()
        if not shape:
            return f"torch.tensor({self.pick(FLOAT_CONSTS)})"
        if roll < 0.4:
            return f"torch.ones({fmt_shape(shape)})"
        if roll < 0.7:
            return f"torch.full({fmt_shape(shape)}, {self.pick(FLOAT_CONSTS)})"
        return f"torch.linspace(-1, 1, {numel(shape)}).reshape({fmt_shape(shape)})"

    def tensor_expr(self, scope: Scope, shape: tuple[int, ...], depth: int) -> str:
        if depth <= 0:
            return self.leaf_tensor(scope, shape)
        options = [
            (4, "leaf"), (3, "unary"), (5, "binary"), (1, "division"), (2, "matmul"),
            (2, "reduce"), (1, "index"), (1, "seq_item"), (1, "ternary"), (1, "stack"),
            (1, "transpose"), (1 if self.helpers else 0, "call"),
        ]
        kind = self.weighted(options)
        sub = depth - 1
        if kind == "unary":
            self.use("unary")
            fn = self.pick(UNARY)
            inner = self.tensor_expr(scope, shape, sub)
            if fn == "exp":
                inner = f"torch.tanh({inner})"  # exp of a bounded value: no overflow after a few rounds
            return f"torch.{fn}({inner})" if self.chance(0.6) else f"{inner}.{fn}()"
        if kind == "binary":
            op = self.pick(["+", "-", "*"])
            left = self.tensor_expr(scope, shape, sub)
            roll = self.rng.random()
            if roll < 0.6:
                right = self.tensor_expr(scope, shape, sub)
            elif roll < 0.75:
                right = self.tensor_expr(scope, (), sub)
            else:
                right = self.number_expr(scope, self.pick([INT, FLOAT]), sub)
            return f"({left} {op} {right})" if self.chance(0.8) else f"({right} {op} {left})"
        if kind == "division":
            self.use("division")
            left = self.tensor_expr(scope, shape, sub)
            if self.chance(0.5):
                return f"({left} / ({self.tensor_expr(scope, shape, sub)}.abs() + 1))"
            return f"({left} / {self.pick([2, 3.0, -4, 0.5])})"
        if kind == "matmul" and len(shape) <= 2:
            self.use("matmul")
            k = self.pick(self.dims)
            left_shape = (shape[0], k) if len(shape) == 2 else (shape[0], k) if len(shape) == 1 else (k,)
            right_shape = (k, shape[1]) if len(shape) == 2 else (k,)
            left = self.tensor_expr(scope, left_shape, sub)
            right = self.tensor_expr(scope, right_shape, sub)
            if self.chance(0.7):
                return f"({left} @ {right})"
            return f"torch.matmul({left}, {right})"
        if kind == "reduce":
            self.use("reduction")
            if not shape and self.chance(0.6):
                src = self.tensor_expr(scope, self.pick(self.shapes[1:]), sub)
                fn = self.pick(["sum", "mean", "max"])
                return f"{src}.{fn}()" if self.chance(0.7) else f"torch.{fn}({src})"
            if len(shape) <= 1:
                self.use("dim_reduction")
                dim = self.rng.randint(0, len(shape))
                src_shape = shape[:dim] + (self.pick(self.dims),) + shape[dim:]
                src = self.tensor_expr(scope, src_shape, sub)
                fn = self.pick(["sum", "mean", "max"])
                if fn == "max":
                    return f"{src}.max({dim})[0]" if self.chance(0.5) else f"{src}.max(dim={dim}).values"
                return f"{src}.{fn}({dim})"
        if kind == "index":
            self.use("index")
            size = self.pick(self.dims)
            src = self.tensor_expr(scope, (size, *shape), sub)
            return f"{src}[{self.rng.randrange(size)}]"
        if kind == "seq_item":
            for name, seq in scope.seqs():
                for i, item in enumerate(seq.items):
                    if item == TensorT(shape):
                        self.use("index")
                        return f"{name}[{i}]"
        if kind == "ternary":
            self.use("ternary")
            return (f"({self.tensor_expr(scope, shape, sub)} if {self.condition(scope, 1)} "
                    f"else {self.tensor_expr(scope, shape, sub)})")
        if kind == "stack" and shape and 2 <= shape[0] <= 3:
            self.use("stack")
            items = [self.tensor_expr(scope, shape[1:], sub) for _ in range(shape[0])]
            return f"torch.stack([{', '.join(items)}])"
        if kind == "transpose" and len(shape) == 2:
            self.use("transpose")
            src = self.tensor_expr(scope, (shape[1], shape[0]), sub)
            return f"{src}.t()" if self.chance(0.5) else f"{src}.T"
        if kind == "call":
            candidates = [h for h in self.helpers if h.returns == TensorT(shape)]
            if candidates:
                return self.call_text(scope, self.pick(candidates))
        return self.leaf_tensor(scope, shape)

    def number_expr(self, scope: Scope, kind: VType, depth: int) -> str:
        names = scope.names(kind)
        if depth <= 0 or self.chance(0.35):
            if names and self.chance(0.7):
                return self.pick(names)
            return str(self.rng.randint(0, 4)) if kind == INT else str(self.pick(FLOAT_CONSTS))
        sub = depth - 1
        roll = self.rng.random()
        if kind == INT:
            if roll < 0.2 and scope.tensors():
                name, t = self.pick(scope.tensors())
                if t.shape:
                    return f"{name}.shape[{self.rng.randrange(len(t.shape))}]"
                return f"{name}.dim()"
            if roll < 0.3 and scope.seqs():
                return f"len({self.pick(scope.seqs())[0]})"
            if roll < 0.35 and scope.tensors():
                self.use("scalar_conversion")  # Tensor.__int__ reads data: a break inside the expression
                return f"int(({self.pick(scope.tensors())[0]} > 0).sum())"
            if roll < 0.4:
                for name, seq in scope.seqs():
                    if INT in seq.items:
                        self.use("index")
                        return f"{name}[{seq.items.index(INT)}]"
            op = self.pick(["+", "-", "*"])
            return f"({self.number_expr(scope, INT, sub)} {op} {self.number_expr(scope, INT, sub)})"
        if roll < 0.2:
            return f"float({self.number_expr(scope, INT, sub)})"
        if roll < 0.25 and scope.tensors():
            self.use("scalar_conversion")
            return f"float({self.pick(scope.tensors())[0]}.{self.pick(['sum', 'mean', 'max'])}())"
        if roll < 0.3:
            for name, seq in scope.seqs():
                if FLOAT in seq.items:
                    self.use("index")
                    return f"{name}[{seq.items.index(FLOAT)}]"
        if roll < 0.4:
            return f"({self.number_expr(scope, FLOAT, sub)} / 2.0)"
        if roll < 0.45 and scope.names(FLOAT):
            self.use("copysign")  # tells -0.0 from 0.0
            return f"math.copysign(1.0, {self.pick(scope.names(FLOAT))})"
        op = self.pick(["+", "-", "*"])
        return f"({self.number_expr(scope, FLOAT, sub)} {op} {self.number_expr(scope, self.pick([INT, FLOAT]), sub)})"

    def condition(self, scope: Scope, depth: int) -> str:
        roll = self.rng.random()
        if depth > 0 and roll < 0.15:
            self.use("and_or")
            op = self.pick(["and", "or"])
            return f"{self.condition(scope, depth - 1)} {op} {self.condition(scope, depth - 1)}"
        if roll < 0.65 and scope.tensors():
            self.use("tensor_if")
            name, t = self.pick(scope.tensors())
            if self.chance(0.2):  # a condition on an expression: the break has more on the stack
                self.use("expr_condition")
                name = f"({self.tensor_expr(scope, t.shape, 1)})"
            threshold = self.pick([0, 0.5, -0.5, 1])
            form = self.rng.randrange(5)
            if form == 0:
                return f"{name}.sum() > {threshold}"
            if form == 1:
                return f"({name} > {threshold}).any()"
            if form == 2:
                return f"not ({name} < {threshold}).all()"
            if form == 3:
                return f"{name}.mean() < {self.number_expr(scope, FLOAT, 1)}"
            return f"{name}.max() > {threshold}"
        self.use("python_if")
        if scope.names(INT) and self.chance(0.6):
            name = self.pick(scope.names(INT))
            return self.pick([f"{name} > {self.rng.randint(0, 3)}", f"{name} % 2 == 0"])
        if scope.names(FLOAT) and self.chance(0.6):
            return f"{self.pick(scope.names(FLOAT))} < {self.pick(FLOAT_CONSTS)}"
        if scope.seqs():
            return f"len({self.pick(scope.seqs())[0]}) > 1"
        return self.pick(["True", "False"])

    def weighted(self, options: list[tuple[int, T]]) -> T:
        """One of the options, drawn with the given weights (a weight of 0 is never drawn)."""
        return self.rng.choices([o for _, o in options], weights=[w for w, _ in options])[0]
