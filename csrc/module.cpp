// module.cpp - the pyframe._C extension module: glues the C half (eval_frame.c: the hook,
// CallbackScope, FrameInfo, SKIP/RUN_ONLY, set_eval_frame; module_call.c: ModuleCall, InstanceCall) and the C++ half (guard_*.cpp,
// cache.cpp) into one pybind11 module. See docs/c_layer.md for the API.
#include "pyframe.h"

#include <pybind11/pybind11.h>

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
    m.doc() =
        "pyframe's C layer: a PEP 523 frame-evaluation hook with a per-thread callback, a "
        "per-code cache of (guards, code) entries run in shadow frames, and compiled guard trees.";
    if (pf_eval_frame_init(m.ptr()) < 0 || pf_module_call_init(m.ptr()) < 0) {
        throw py::error_already_set();
    }
    m.attr("EXPORTS_LOCAL") = PF_EXPORTS_LOCAL;
    pyframe::bind_guards(m);
    pyframe::bind_cache(m);
}
