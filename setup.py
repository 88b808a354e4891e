"""Builds pyframe._C from csrc/ (metadata lives in pyproject.toml).

The extension mixes C and C++ (see csrc/pyframe.h):
  * C   (eval_frame.c, cpython_defs.c) compiled as C11; they define Py_BUILD_CORE themselves,
    around CPython's internal headers only.
  * C++ (cache.cpp, guard_*.cpp, leaves.cpp, torch_leaves.cpp, module.cpp) compiled as C++20
    against pybind11 (the pip package: its headers come before the copy torch ships).
torch_leaves.cpp reads tensor metadata and torch's global state through torch's C++ headers, so
the build needs torch (pyproject.toml lists it) and _C links libc10, libtorch_cpu (autocast) and
libtorch_python. It names no run path: `import pyframe` imports torch first, which has loaded
those libraries.
"""
import os
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

import pybind11
import torch
from torch.utils import cpp_extension

C_SOURCES = ["csrc/eval_frame.c", "csrc/cpython_defs.c", "csrc/module_call.c"]
CXX_SOURCES = [
    "csrc/cache.cpp", "csrc/guard_check.cpp", "csrc/guard_build.cpp", "csrc/guard_snapshot.cpp",
    "csrc/guard_bindings.cpp", "csrc/leaves.cpp", "csrc/torch_leaves.cpp", "csrc/module.cpp",
]
COMMON_FLAGS = ["-O2", "-fvisibility=hidden", "-Wall"]
# C++ must agree with libtorch on the std::string ABI (torch_leaves.cpp passes strings to guard_build.cpp).
CXX_FLAGS = ["-std=c++20", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]


class BuildExt(build_ext):
    """Per-language flags (setuptools passes one flag list to every source file), and the
    sources of the extension compiled in parallel (setuptools compiles them one by one; the
    torch headers make that a minute on two cores)."""

    def build_extensions(self):
        compiler = self.compiler
        if compiler.compiler_type == "unix":
            compile_one = compiler._compile

            def _compile(obj, src, ext, cc_args, extra_postargs, pp_opts):
                flags = CXX_FLAGS if src.endswith(".cpp") else ["-std=c11"]
                return compile_one(obj, src, ext, cc_args, [*extra_postargs, *flags], pp_opts)

            def compile_all(sources, output_dir=None, macros=None, include_dirs=None, debug=False,
                            extra_preargs=None, extra_postargs=None, depends=None):
                macros, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
                    output_dir, macros, include_dirs, sources, depends, extra_postargs)
                cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)
                with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
                    list(pool.map(lambda obj: _compile(obj, *build[obj], cc_args, extra_postargs, pp_opts),
                                  [obj for obj in objects if obj in build]))
                return objects

            compiler.compile = compile_all
        super().build_extensions()


setup(
    ext_modules=[
        Extension(
            "pyframe._C",
            sources=C_SOURCES + CXX_SOURCES,
            depends=["csrc/pyframe.h", "csrc/guards.h", "csrc/guard_tree.h", "csrc/guard_snapshot.h",
                     "csrc/guard_aliasing.h"],
            include_dirs=["csrc", pybind11.get_include(), *cpp_extension.include_paths()],
            library_dirs=cpp_extension.library_paths(),
            libraries=["c10", "torch_cpu", "torch_python"],
            extra_compile_args=COMMON_FLAGS,
            language="c++",
        )
    ],
    cmdclass={"build_ext": BuildExt},
)
