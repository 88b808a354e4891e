"""Builds pyframe._C from csrc/ (metadata lives in pyproject.toml).

The extension mixes C and C++ (see csrc/pyframe.h):
  * C   (eval_frame.c, cpython_defs.c) compiled as C11; they define Py_BUILD_CORE themselves,
    around CPython's internal headers only.
  * C++ (cache.cpp, guards.cpp, leaves.cpp, module.cpp) compiled as C++17 against pybind11.
It does not link libtorch and includes no torch header.
"""
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

import pybind11

C_SOURCES = ["csrc/eval_frame.c", "csrc/cpython_defs.c"]
CXX_SOURCES = ["csrc/cache.cpp", "csrc/guards.cpp", "csrc/leaves.cpp", "csrc/module.cpp"]
COMMON_FLAGS = ["-O2", "-fvisibility=hidden", "-Wall"]


class BuildExt(build_ext):
    """Per-language standard flags: setuptools passes one flag list to every source file."""

    def build_extensions(self):
        if self.compiler.compiler_type == "unix":
            original_compile = self.compiler._compile

            def _compile(obj, src, ext, cc_args, extra_postargs, pp_opts):
                std = "-std=c++17" if src.endswith(".cpp") else "-std=c11"
                return original_compile(obj, src, ext, cc_args, [*extra_postargs, std], pp_opts)

            self.compiler._compile = _compile
        super().build_extensions()


setup(
    ext_modules=[
        Extension(
            "pyframe._C",
            sources=C_SOURCES + CXX_SOURCES,
            depends=["csrc/pyframe.h", "csrc/guards.h"],
            include_dirs=["csrc", pybind11.get_include()],
            extra_compile_args=COMMON_FLAGS,
            language="c++",
        )
    ],
    cmdclass={"build_ext": BuildExt},
)
