"""The shared corpus: small programs run eagerly, under pyframe and under torch._dynamo.

Each module groups cases by topic and declares them with ``pyframe.debug.cases.case``. The lists
below are what tests/test_corpus.py, ``python -m pyframe compare`` and the benchmarks load.

Straight-line cases have no data-dependent control flow and call no user Python helpers: each is
one graph in torch._dynamo (or none, for cases tagged ``"nograph"`` that only compute with Python
constants and tensor metadata). Cases needing graph breaks live in ``graph_breaks`` (tag ``"break"``).
Library cases (``transformers_models``) run models of installed packages, one graph each in torch._dynamo.
"""

STRAIGHT_LINE = [
    "tests.cases.elementwise",
    "tests.cases.reductions",
    "tests.cases.matmul",
    "tests.cases.views",
    "tests.cases.indexing",
    "tests.cases.kwargs",
    "tests.cases.nn_functional",
    "tests.cases.constants",
    "tests.cases.modules",
    "tests.cases.models",
    "tests.cases.convnets",
    "tests.cases.vision_transformers",
    "tests.cases.language_models",
    "tests.cases.sequence_encoders",
    "tests.cases.audio_and_recommendation",
    "tests.cases.inlining",
    "tests.cases.containers",
    "tests.cases.control_flow",
    "tests.cases.builtins_calls",
    "tests.cases.side_effects",
    "tests.cases.iterators",
    "tests.cases.python_objects",
    "tests.cases.dict_subclasses",
    "tests.cases.pattern_matching",
    "tests.cases.autograd_functions",
    "tests.cases.activation_checkpoint",
    "tests.cases.cond_op",
    "tests.cases.builtin_subclasses",
    "tests.cases.set_algebra",
    "tests.cases.stdlib_calls",
    "tests.cases.copy_protocol",
    "tests.cases.function_objects",
    "tests.cases.generator_objects",
    "tests.cases.class_protocols",
    "tests.cases.scopes",
    "tests.cases.torch_python_objects",
    "tests.cases.metaclasses",
    "tests.cases.builtin_descriptors",
    "tests.cases.wrapped_functions",
    "tests.cases.functorch_vmap",
    "tests.cases.torch_function_modes",
    "tests.cases.weak_references",
    "tests.cases.numpy_arrays",
]
GRAPH_BREAKS = ["tests.cases.graph_breaks", "tests.cases.autograd_function_breaks", "tests.cases.compiled_path"]
# Code installed by pip, called as its users call it (no cases when the library is not installed).
LIBRARIES = ["tests.cases.transformers_models"]
ALL = STRAIGHT_LINE + GRAPH_BREAKS + LIBRARIES
