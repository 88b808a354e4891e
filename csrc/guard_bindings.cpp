// guard_bindings.cpp - the Python face of guard trees (pyframe._C.GuardManager and
// RootGuardManager, built by pyframe/guards.py) and the C interface pyframe.h declares for the
// hook's cache (cache.cpp): a tree from its Python object, its export count. The check itself,
// pf_guards_check_frame, is in guard_check.cpp.
#include "guard_tree.h"

#include <pybind11/stl.h>

namespace py = pybind11;

namespace pyframe {

namespace {

FrameView python_view(const py::object &f_locals, const py::object &f_globals,
                      const py::object &f_builtins, const py::object &closure) {
    FrameView fv;
    fv.f_locals = f_locals.ptr();
    fv.globals = f_globals.ptr();
    fv.builtins = f_builtins.ptr();
    fv.closure = closure.ptr();
    return fv;
}

constexpr auto kChild = py::return_value_policy::reference_internal;

void bind_tuple_iterator_rest(py::module_ &m) {
    m.def("tuple_iterator_rest", [](py::handle it) {
              PyObject *rest = pf_tuple_iterator_rest(it.ptr());
              if (rest == nullptr) {
                  throw py::error_already_set();
              }
              return py::reinterpret_steal<py::tuple>(rest);
          }, py::arg("it"),
          "the items a tuple iterator has still to give, as a tuple (what its guards read)");
}

void bind_weakref_referent(py::module_ &m) {
    m.def("weakref_referent", [](py::handle ref) {
              PyObject *referent = pf_weakref_referent(ref.ptr());
              if (referent == nullptr) {
                  throw py::error_already_set();
              }
              return py::reinterpret_steal<py::object>(referent);
          }, py::arg("ref"),
          "ref() for a weakref.ref, its referent or None, read as its guards read it (no Python "
          "__call__ asked); TypeError for anything else");
}

void bind_guard_manager(py::module_ &m) {
    py::class_<GuardManager>(m, "GuardManager", py::module_local(),
                             "One node of a guard tree: fetches one value (once per check) and "
                             "runs its leaf checks, then its children.")
        .def_property_readonly("source", &GuardManager::source,
                               "the Python expression this node reads, e.g. L['x'].weight")
        .def("attr", &GuardManager::attr, py::arg("name"), kChild, "child node: getattr(v, name)")
        .def("generic_attr", &GuardManager::generic_attr, py::arg("name"), kChild,
             "child node: object.__getattribute__(v, name)")
        .def("item", &GuardManager::item, py::arg("key"), kChild,
             "child node: v[key] (dicts: exact lookup, no __getitem__ call)")
        .def("dict_key", &GuardManager::dict_key, py::arg("index"), kChild,
             "child node: the index-th key of a dict, in its iteration order")
        .def("dict_value", &GuardManager::dict_value, py::arg("index"), kChild,
             "child node: the value of the index-th key of a dict")
        .def("tuple_iterator_rest", &GuardManager::tuple_iterator_rest, kChild,
             "child node: the items a tuple iterator has still to give, as a tuple")
        .def("weakref_call", &GuardManager::weakref_call, kChild,
             "child node: v() for a weakref.ref v, its referent now (None once dead)")
        .def("tensor_property", &GuardManager::tensor_property, py::arg("what"), py::arg("dim") = 0, kChild,
             "the child node for the tensor's size or stride in dimension `dim`, or its "
             "storage offset (what: 'size', 'stride', 'storage_offset'), as a Python int")
        .def("add_type_match", &GuardManager::add_type_match, py::arg("tp"), py::arg("text") = "")
        .def("add_id_match", &GuardManager::add_id_match, py::arg("obj"), py::arg("text") = "")
        .def("add_equals_match", &GuardManager::add_equals_match, py::arg("value"),
             py::arg("text") = "")
        .def("add_none_match", &GuardManager::add_none_match, py::arg("text") = "")
        .def("add_not_none_match", &GuardManager::add_not_none_match, py::arg("text") = "")
        .def("add_len_match", &GuardManager::add_len_match, py::arg("n"), py::arg("text") = "")
        .def("add_attrs_len_match", &GuardManager::add_attrs_len_match, py::arg("names"),
             py::arg("lengths"), py::arg("text") = "",
             "passes when len(getattr(v, names[i])) == lengths[i] for every i")
        .def("add_dict_keys_match", &GuardManager::add_dict_keys_match, py::arg("keys"),
             py::arg("text") = "")
        .def("add_dict_keys_id_match", &GuardManager::add_dict_keys_id_match, py::arg("keys"),
             py::arg("by_id"), py::arg("text") = "")
        .def("add_hasattr_match", &GuardManager::add_hasattr_match, py::arg("name"),
             py::arg("expected"), py::arg("text") = "")
        .def("add_class_attr_match", &GuardManager::add_class_attr_match, py::arg("name"),
             py::arg("expected"), py::arg("check_instance"), py::arg("text"),
             "passes when type(v)'s MRO holds `expected` (None: nothing) under name and, unless "
             "that is a data descriptor or check_instance is false, v's __dict__ lacks name")
        .def("add_dict_contains_match", &GuardManager::add_dict_contains_match, py::arg("key"),
             py::arg("expected"), py::arg("text") = "", "passes when (key in v) == expected, v a dict")
        .def("add_tensor_match", &GuardManager::add_tensor_match, py::arg("tp"), py::arg("dtype"),
             py::arg("device"), py::arg("sizes"), py::arg("strides"), py::arg("requires_grad"),
             py::arg("text") = "", py::arg("storage_offset") = -1, py::arg("storage_nbytes") = -1,
             "storage_offset, storage_nbytes: checked when not -1")
        .def("texts", &GuardManager::texts, "every check's text below this node, in tree order")
        .def("__repr__", [](const GuardManager &g) {
            return "<pyframe._C.GuardManager " + g.source() + ">";
        });
}

void bind_root_guard_manager(py::module_ &m) {
    py::class_<RootGuardManager>(m, "RootGuardManager", py::module_local(),
                                 "The guards of one cache entry: a tree of GuardManager nodes "
                                 "rooted at the frame's locals, globals, builtins and closure.")
        .def(py::init<bool>(), py::arg("skip_unchanged") = true,
             "skip_unchanged: let identity-pinned nodes skip their subtree while unchanged")
        .def("local", &RootGuardManager::local, py::arg("name"), py::arg("index"), kChild,
             "root node: fast local slot `index` of the original code (by name in check())")
        .def("global_", &RootGuardManager::global_, py::arg("name"), kChild,
             "root node: f_globals[name] (absent: fails)")
        .def("globals_dict", &RootGuardManager::globals_dict, kChild,
             "root node: the frame's globals dict itself")
        .def("builtin", &RootGuardManager::builtin, py::arg("name"), kChild,
             "root node: f_builtins[name]")
        .def("closure", &RootGuardManager::closure, py::arg("index"), kChild,
             "root node: f_func.__closure__[index].cell_contents")
        .def("add_call_match", &RootGuardManager::add_call_match, py::arg("fn"),
             py::arg("expected"), py::arg("text") = "", "passes when fn() == expected")
        .def("add_torch_state_match", &RootGuardManager::add_torch_state_match, py::arg("state"),
             py::arg("expected"), py::arg("text") = "",
             "passes when torch's global `state` (grad_mode, inference_mode, default_dtype, "
             "autocast_cpu, autocast_cuda; handled_exception: an exception being handled) is "
             "`expected` (autocast: None when off, else its dtype)")
        .def(
            "check",
            [](const RootGuardManager &r, py::object f_locals, py::object f_globals,
               py::object f_builtins, py::object closure) {
                return r.check_frame(python_view(f_locals, f_globals, f_builtins, closure));
            },
            py::arg("f_locals"), py::arg("f_globals"), py::arg("f_builtins"),
            py::arg("closure") = py::none())
        .def(
            "first_failure",
            [](RootGuardManager &r, py::object f_locals, py::object f_globals,
               py::object f_builtins, py::object closure) -> py::object {
                const std::string *t =
                    r.first_failure(python_view(f_locals, f_globals, f_builtins, closure));
                if (t == nullptr) {
                    return py::none();
                }
                return py::str(*t);
            },
            py::arg("f_locals"), py::arg("f_globals"), py::arg("f_builtins"),
            py::arg("closure") = py::none(),
            "the text of the first failing check, or None if all pass")
        .def("add_aliasing_match", &RootGuardManager::add_aliasing_match, py::arg("nodes"),
             py::arg("classes"), py::arg("text") = "",
             py::arg("storage_classes") = std::vector<int>{},
             "passes when the nodes' values are one object where `classes` are equal and distinct "
             "objects where they differ (checked after the rest of the tree); with "
             "`storage_classes`, also tensors on one storage where those are equal and on "
             "distinct storages where they differ")
        .def("add_shape_match", &RootGuardManager::add_shape_match, py::arg("nodes"),
             py::arg("program"), py::arg("text"),
             py::arg("reads") = std::vector<std::pair<std::string, Py_ssize_t>>{},
             "passes when `program` (ShapeOp words, guard_shapes.h) run on ints read from the "
             "nodes' values gives true (checked after the rest of the tree); `reads`, one "
             "(what, dim) per node: ('value', 0) the node's int value, ('size', d), ('stride', d) "
             "or ('storage_offset', 0) of the node's tensor (default: every node's int value)")
        .def("export", &RootGuardManager::export_node, py::arg("node"),
             "hand `node`'s value to the frame on every pass (the hook stores the exports "
             "tuple in the local " PF_EXPORTS_LOCAL "); returns its index in that tuple")
        .def_property_readonly("export_count", &RootGuardManager::export_count)
        .def("group_exports", &RootGuardManager::group_exports, py::arg("n"),
             "hand the first n exports (a graph's arguments) in a tuple of their own: the exports "
             "tuple is then (that tuple, the other exports...)")
        .def(
            "check_exports",
            [](const RootGuardManager &r, py::object f_locals, py::object f_globals,
               py::object f_builtins, py::object closure) -> py::object {
                PyObject *exports = nullptr;
                if (!r.check_frame(python_view(f_locals, f_globals, f_builtins, closure),
                                   &exports)) {
                    return py::none();
                }
                if (exports == nullptr) {
                    return py::tuple();
                }
                return py::reinterpret_steal<py::object>(exports);
            },
            py::arg("f_locals"), py::arg("f_globals"), py::arg("f_builtins"),
            py::arg("closure") = py::none(),
            "check(), returning the exports tuple on a pass and None on a failure")
        .def("texts", &RootGuardManager::texts, "every check's text, in tree order")
        .def("snapshots", &RootGuardManager::snapshots,
             "(source, state, facts, anchors (their sources), {fact kind: count}) of every node whose "
             "identity is pinned: what lets it skip its subtree while nothing changed")
        .def("__len__", [](const RootGuardManager &r) { return r.texts().size(); });
}

}  // namespace

void bind_guards(py::module_ &m) {
    bind_tuple_iterator_rest(m);
    bind_weakref_referent(m);
    bind_guard_manager(m);
    bind_root_guard_manager(m);
}

}  // namespace pyframe

// ---- the C interface (pyframe.h) ----------------------------------------------------------------

extern "C" void *pf_guards_root_of(PyObject *obj) {
    try {
        if (obj != Py_None) {
            auto *root = py::cast<pyframe::RootGuardManager *>(py::handle(obj));
            if (root != nullptr) {
                return root;
            }
        }
    } catch (const py::cast_error &) {
    } catch (const py::error_already_set &) {
        PyErr_Clear();
    }
    PyErr_Format(PyExc_TypeError, "pyframe: guards must be a _C.RootGuardManager, not %.100s",
                 Py_TYPE(obj)->tp_name);
    return nullptr;
}

extern "C" int pf_guards_export_count(void *root) {
    return static_cast<pyframe::RootGuardManager *>(root)->export_count();
}
