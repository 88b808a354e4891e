"""Shrink a failing fuzz program while it keeps failing the same way.

Greedy reduction over the program's syntax tree, repeated until nothing more can go:

- delete a statement (any depth; an emptied block gets ``pass``), or a whole helper function;
- replace an ``if`` by its body or its ``else`` body, a ``for`` by nothing;
- replace ``a if c else b`` by ``a`` or ``b``, ``a op b`` by ``a`` or ``b``, ``c1 and c2`` by one side;
- drop items of a returned tuple.

A candidate is kept when ``run_program`` on it fails with the same ``Outcome.signature()`` (so a
candidate whose eager run now raises, e.g. on a name it deleted, is "invalid" and rejected). The
entry function's parameters are never touched, so the inputs stay those of the original seed.
"""
from __future__ import annotations

import ast
import copy
import dataclasses
from typing import Callable, Iterator

from .generator import Program
from .runner import Engine, Outcome, run_program

# An edit: (description, function that applies it to a fresh copy of the tree, in place).
Edit = tuple[str, Callable[[ast.Module], None]]


def _bodies(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """Every (node, field) holding a statement list, outermost first."""
    for node in ast.walk(tree):
        for field in ("body", "orelse"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                yield node, field


def _locate(tree: ast.Module, path: tuple[int, str]) -> tuple[ast.AST, str]:
    """The (node, field) found at position `path[0]` of `_bodies` in `tree` (trees are copied, so
    edits find their target again by position)."""
    return list(_bodies(tree))[path[0]][0], path[1]


def _set_body(node: ast.AST, field: str, stmts: list[ast.stmt]) -> None:
    if not stmts and (field == "body" or isinstance(node, ast.Module)):
        stmts = [ast.Pass()]
    setattr(node, field, stmts)


def _statement_edits(tree: ast.Module) -> Iterator[Edit]:
    for index, (node, field) in enumerate(_bodies(tree)):
        stmts = getattr(node, field)
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "fuzz_main":
                continue
            if isinstance(stmt, (ast.Import, ast.Expr, ast.ClassDef, ast.Assign)) and isinstance(node, ast.Module):
                continue  # `import torch`, the docstring, `class Config` and `cfg = Config()`

            def delete(t: ast.Module, index=index, field=field, i=i) -> None:
                target, f = _locate(t, (index, field))
                stmts = getattr(target, f)
                _set_body(target, f, stmts[:i] + stmts[i + 1:])

            yield f"delete line {getattr(stmt, 'lineno', '?')}", delete
            if isinstance(stmt, ast.If):
                for branch in ("body", "orelse"):
                    if getattr(stmt, branch):
                        def inline(t: ast.Module, index=index, field=field, i=i, branch=branch) -> None:
                            target, f = _locate(t, (index, field))
                            stmts = getattr(target, f)
                            _set_body(target, f, stmts[:i] + getattr(stmts[i], branch) + stmts[i + 1:])

                        yield f"keep only the {branch} of the if at line {stmt.lineno}", inline


def _expression_edits(tree: ast.Module) -> Iterator[Edit]:
    nodes = list(ast.walk(tree))
    for index, node in enumerate(nodes):
        if isinstance(node, ast.IfExp):
            options = ("body", "orelse")
        elif isinstance(node, ast.BinOp):
            options = ("left", "right")
        elif isinstance(node, ast.BoolOp):
            options = ("values[0]", "values[-1]")
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and len(node.value.elts) > 1:
            for k in range(len(node.value.elts)):
                def drop(t: ast.Module, index=index, k=k) -> None:
                    ret = list(ast.walk(t))[index]
                    del ret.value.elts[k]

                yield f"drop item {k} of the return at line {node.lineno}", drop
            continue
        else:
            continue
        for option in options:
            def replace(t: ast.Module, index=index, option=option) -> None:
                target = list(ast.walk(t))[index]
                if option.startswith("values"):
                    keep = target.values[0 if option == "values[0]" else -1]
                else:
                    keep = getattr(target, option)
                _replace_node(t, target, keep)

            yield f"replace the {type(node).__name__} at line {getattr(node, 'lineno', '?')} by its {option}", replace


def _replace_node(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new
                        return


def _edits(tree: ast.Module) -> list[Edit]:
    return [*_statement_edits(tree), *_expression_edits(tree)]


def minimize(program: Program, engine: Engine | None = None, *, max_checks: int = 2000,
             progress: Callable[[str], None] | None = None) -> tuple[Program, Outcome]:
    """The smallest program found that fails like ``program`` does, and its outcome.

    Raises ValueError if ``program`` does not fail to begin with.
    """
    original = run_program(program, engine)
    if not original.failed:
        raise ValueError(f"seed {program.seed} does not fail (status {original.status})")
    want = original.signature()
    best, best_outcome = program, original
    checks = 0
    changed = True
    while changed and checks < max_checks:
        changed = False
        tree = ast.parse(best.source)
        edits = _edits(tree)
        i = 0
        while i < len(edits) and checks < max_checks:
            description, apply = edits[i]
            candidate_tree = copy.deepcopy(tree)
            try:
                apply(candidate_tree)
                source = ast.unparse(ast.fix_missing_locations(candidate_tree)) + "\n"
                compile(source, "<minimize>", "exec")
            except (SyntaxError, ValueError, IndexError, AttributeError):
                i += 1
                continue
            if source == best.source:  # e.g. deleting a lone `pass`, which comes back
                i += 1
                continue
            checks += 1
            candidate = dataclasses.replace(best, source=source)
            outcome = run_program(candidate, engine)
            if outcome.failed and outcome.signature() == want:
                if progress is not None:
                    progress(f"{description}: {len(source.splitlines())} lines")
                best, best_outcome, tree = candidate, outcome, candidate_tree
                edits = _edits(tree)  # positions moved: enumerate again, from the same place
                changed = True
            else:
                i += 1
    return best, best_outcome
