"""pyframe's modules form layers, not a web (docs/architecture.md, "Layers").

Every import of a pyframe module counts: at module level, inside a function, and under
`if TYPE_CHECKING:`. The tests check that the import graph has no cycle, that no module imports one
of a higher layer, that imports inside functions are only the command line's lazy subcommands,
and that the package never imports the repository's `tests`.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "pyframe"

# Bottom to top; a module belongs to the first layer with a prefix that names it or a package
# holding it (`ops_` names a family of modules; "pyframe" is the package's __init__ alone). docs/architecture.md gives the reasons; keep the two in step.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("C extension and utilities", ("pyframe._C", "pyframe.config", "pyframe.exc", "pyframe.logs", "pyframe.structured_trace",
                                   "pyframe.source", "pyframe.dynamo_interop", "pyframe.trace_rules",
                                   "pyframe.markers", "pyframe.gc_pause")),
    ("guards and bytecode", ("pyframe.guards", "pyframe.guard_tree", "pyframe.guard_filter", "pyframe.codegen", "pyframe.resume", "pyframe.rerun")),
    ("graph and backends", ("pyframe.fake", "pyframe.fx_python_code", "pyframe.backends", "pyframe.graph_inputs", "pyframe.graph",
                            "pyframe.graph_passes")),
    # the translator, bottom to top inside: decoding and analysis; the trackers; their mutations;
    # the opcode handlers; the interpreter; the entry point that finishes a trace
    ("translator: decoding, analysis, hooks", ("pyframe.translator.decode", "pyframe.translator.analysis",
                                               "pyframe.translator.hooks")),
    ("translator: variable trackers", ("pyframe.translator.variables",)),
    ("translator: side effects", ("pyframe.translator.side_effects",)),
    ("translator: opcode handlers", ("pyframe.translator.ops_", "pyframe.translator.cells")),
    ("translator: interpreter", ("pyframe.translator.instructions", "pyframe.translator.binding",
                                 "pyframe.translator.code_cache")),
    ("translator: finishing a trace", ("pyframe.translator",)),
    # warm start: what the miss path keeps of an entry and the loaded entries it asks for
    ("warm start: capture and store", ("pyframe.warm.codes", "pyframe.warm.refs", "pyframe.warm.format",
                                       "pyframe.warm.graphs", "pyframe.warm.kernels", "pyframe.warm.capture",
                                       "pyframe.warm.tree", "pyframe.warm.store")),
    ("miss path and API", ("pyframe.convert_frame", "pyframe.eval_frame", "pyframe.export", "pyframe.decorators",
                           "pyframe.warm")),
    ("debugging", ("pyframe.debug", "pyframe.seeds")),
    ("the package's facade", ("pyframe",)),
    ("programs on top of the facade", ("pyframe.demo", "pyframe.__main__")),
]
# Imports inside functions are allowed only here: the command line imports a subcommand's modules
# when it runs (`python -m pyframe --help` stays fast). Nowhere else may one dodge a cycle.
LAZY_IMPORTERS = {"pyframe.__main__"}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    where: str  # "module", "function" or "TYPE_CHECKING"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _known(name: str, modules: set[str]) -> str | None:
    """The pyframe module `name` is, or the closest package holding it (`pyframe.x.Class`)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports() -> list[Import]:
    modules = _modules()
    names = set(modules) | {"pyframe._C"}
    found = []
    for importer, path in modules.items():
        is_package = path.name == "__init__.py"

        def visit(node: ast.AST, where: str) -> None:
            for child in ast.iter_child_nodes(node):
                inner = where
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    inner = "function"
                elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test) and where == "module":
                    inner = "TYPE_CHECKING"
                targets = []
                if isinstance(child, ast.Import):
                    targets = [alias.name for alias in child.names]
                elif isinstance(child, ast.ImportFrom):
                    base = _resolve(importer, is_package, child)
                    targets = [f"{base}.{alias.name}" for alias in child.names]
                for target in targets:
                    if target.split(".")[0] == "tests":
                        found.append(Import(importer, target, child.lineno, where))
                    module = _known(target, names)
                    if module is not None and module != importer:
                        found.append(Import(importer, module, child.lineno, where))
                visit(child, inner)

        visit(ast.parse(path.read_text()), "module")
    return found


def layer_of(module: str) -> int:
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or (p != "pyframe" and module.startswith(p if p.endswith("_") else p + "."))
               for p in prefixes):
            return index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS here and to docs/architecture.md")


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return found


def test_every_module_has_a_layer():
    for module in [*_modules(), "pyframe._C"]:
        layer_of(module)


def test_no_import_cycle():
    edges: dict[str, set[str]] = {}
    for imp in imports():
        if not imp.imported.startswith("tests"):
            edges.setdefault(imp.importer, set()).add(imp.imported)
    assert _cycles(edges) == []


def test_no_module_imports_a_higher_layer():
    upward = [f"{i.importer}:{i.line} imports {i.imported} ({LAYERS[layer_of(i.imported)][0]}, above "
              f"{LAYERS[layer_of(i.importer)][0]})"
              for i in imports() if not i.imported.startswith("tests") and layer_of(i.imported) > layer_of(i.importer)]
    assert upward == []


def test_no_import_inside_a_function_but_the_command_lines():
    lazy = [f"{i.importer}:{i.line} imports {i.imported} inside a function"
            for i in imports() if i.where == "function" and i.importer not in LAZY_IMPORTERS]
    assert lazy == []


def test_the_package_never_imports_the_repositorys_tests():
    assert [f"{i.importer}:{i.line}" for i in imports() if i.imported.split(".")[0] == "tests"] == []


def test_the_translator_knows_neither_c_nor_the_api():
    above_or_c = {"pyframe._C", "pyframe.convert_frame", "pyframe.eval_frame", "pyframe"}
    reached = [f"{i.importer}:{i.line} imports {i.imported}" for i in imports()
               if i.importer.startswith("pyframe.translator") and i.imported in above_or_c]
    assert reached == []


def test_the_layering_test_sees_imports_of_every_kind():
    """A check on the checker: function-level and TYPE_CHECKING imports are parsed (the ones that
    hid the old circle), as are relative imports of a package's own modules."""
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import X\n"
              "def f():\n    from ..c import Y\n")
    tree = ast.parse(source)
    kinds = [type(n).__name__ for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert kinds == ["ImportFrom", "ImportFrom", "ImportFrom"]
    node = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 2][0]
    assert _resolve("pyframe.translator.variables.a", False, node) == "pyframe.translator.c"
