// guard_bindings.cpp - the Python face of guard trees (pyframe._C.GuardManager and
// RootGuardManager, built by pyframe/guards.py) and the C interface pyframe.h declares for the
// hook's cache (cache.cpp): a tree from its Python object, its export count. The check itself,
// pf_guards_check_frame, is in guard_check.cpp.
#include "guard_tree.h"

#include <pybind11/stl.h>

#include <string>
#include <unordered_map>
#include <vector>

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

// -- a tree made from recorded calls (pyframe/warm/tree.py) -----------------------------------
// Each call is (node, method, args, ...): `node` the index of the node it is made on (0: the root,
// then every node a call made, in order), `method` one of the methods bound above, `args` its
// positional arguments, where a node is named by its index (an int). Made here, the calls cost no
// Python object per node and no pybind11 dispatch per call: what a load of a saved entry pays for
// each of its guards.
enum class Call : uint8_t {
    Local, Global, GlobalsDict, Builtin, Closure, Attr, GenericAttr, Item, DictKey, DictValue,
    TupleIteratorRest, WeakRefCall, TensorProperty, TypeMatch, IdMatch, EqualsMatch, NoneMatch,
    NotNoneMatch, LenMatch, AttrsLenMatch, DictKeysMatch, DictKeysIdMatch, HasattrMatch,
    ClassAttrMatch, DictContainsMatch, TensorMatch, CallMatch, TorchStateMatch, AliasingMatch,
    ShapeMatch, Export, GroupExports
};

const std::unordered_map<std::string, Call> &calls_by_name() {
    static const std::unordered_map<std::string, Call> calls{
        {"local", Call::Local}, {"global_", Call::Global}, {"globals_dict", Call::GlobalsDict},
        {"builtin", Call::Builtin}, {"closure", Call::Closure}, {"attr", Call::Attr},
        {"generic_attr", Call::GenericAttr}, {"item", Call::Item}, {"dict_key", Call::DictKey},
        {"dict_value", Call::DictValue}, {"tuple_iterator_rest", Call::TupleIteratorRest},
        {"weakref_call", Call::WeakRefCall}, {"tensor_property", Call::TensorProperty},
        {"add_type_match", Call::TypeMatch}, {"add_id_match", Call::IdMatch},
        {"add_equals_match", Call::EqualsMatch}, {"add_none_match", Call::NoneMatch},
        {"add_not_none_match", Call::NotNoneMatch}, {"add_len_match", Call::LenMatch},
        {"add_attrs_len_match", Call::AttrsLenMatch}, {"add_dict_keys_match", Call::DictKeysMatch},
        {"add_dict_keys_id_match", Call::DictKeysIdMatch}, {"add_hasattr_match", Call::HasattrMatch},
        {"add_class_attr_match", Call::ClassAttrMatch},
        {"add_dict_contains_match", Call::DictContainsMatch}, {"add_tensor_match", Call::TensorMatch},
        {"add_call_match", Call::CallMatch}, {"add_torch_state_match", Call::TorchStateMatch},
        {"add_aliasing_match", Call::AliasingMatch}, {"add_shape_match", Call::ShapeMatch},
        {"export", Call::Export}, {"group_exports", Call::GroupExports},
    };
    return calls;
}

class Replay {
public:
    explicit Replay(RootGuardManager &root) : root_(root) { made_.push_back(nullptr); }

    void call(Py_ssize_t node, const std::string &method, const py::tuple &args) {
        auto found = calls_by_name().find(method);
        if (found == calls_by_name().end()) {
            throw py::value_error("replay_tree: no guard tree method " + method);
        }
        if (node < 0 || node >= static_cast<Py_ssize_t>(made_.size())) {
            throw py::value_error("replay_tree: node " + std::to_string(node) + " is not made yet");
        }
        Call what = found->second;
        if ((node == 0) != on_root(what)) {
            throw py::value_error("replay_tree: " + method + (node == 0 ? " is not a method of the root"
                                                                        : " is a method of the root"));
        }
        GuardManager *made = node == 0 ? call_root(what, args) : call_node(*made_[node], what, args);
        if (made != nullptr) {
            made_.push_back(made);
        }
    }

private:
    static bool on_root(Call what) {
        switch (what) {
            case Call::Local: case Call::Global: case Call::GlobalsDict: case Call::Builtin:
            case Call::Closure: case Call::CallMatch: case Call::TorchStateMatch:
            case Call::AliasingMatch: case Call::ShapeMatch: case Call::Export: case Call::GroupExports:
                return true;
            default:
                return false;
        }
    }

    template <typename T>
    static T arg(const py::tuple &args, size_t i) {
        if (i >= args.size()) {
            throw py::value_error("replay_tree: a call with too few arguments");
        }
        return args[i].cast<T>();
    }

    GuardManager *node_at(py::handle index) const {
        Py_ssize_t i = index.cast<Py_ssize_t>();
        if (i <= 0 || i >= static_cast<Py_ssize_t>(made_.size())) {
            throw py::value_error("replay_tree: node " + std::to_string(i) + " is not made yet");
        }
        return made_[i];
    }

    std::vector<GuardManager *> nodes_at(py::handle indices) const {
        std::vector<GuardManager *> nodes;
        for (py::handle index : indices) {
            nodes.push_back(node_at(index));
        }
        return nodes;
    }

    GuardManager *call_root(Call what, const py::tuple &args) {
        RootGuardManager &r = root_;
        switch (what) {
            case Call::Local: return r.local(arg<py::str>(args, 0), arg<Py_ssize_t>(args, 1));
            case Call::Global: return r.global_(arg<py::str>(args, 0));
            case Call::GlobalsDict: return r.globals_dict();
            case Call::Builtin: return r.builtin(arg<py::str>(args, 0));
            case Call::Closure: return r.closure(arg<Py_ssize_t>(args, 0));
            case Call::CallMatch:
                r.add_call_match(arg<py::object>(args, 0), arg<py::object>(args, 1), arg<std::string>(args, 2));
                return nullptr;
            case Call::TorchStateMatch:
                r.add_torch_state_match(arg<std::string>(args, 0), arg<py::object>(args, 1),
                                        arg<std::string>(args, 2));
                return nullptr;
            case Call::AliasingMatch:
                r.add_aliasing_match(nodes_at(arg<py::object>(args, 0)), arg<std::vector<int>>(args, 1),
                                     arg<std::string>(args, 2), arg<std::vector<int>>(args, 3));
                return nullptr;
            case Call::ShapeMatch:
                r.add_shape_match(nodes_at(arg<py::object>(args, 0)), arg<std::vector<int64_t>>(args, 1),
                                  arg<std::string>(args, 2),
                                  arg<std::vector<std::pair<std::string, Py_ssize_t>>>(args, 3));
                return nullptr;
            case Call::Export:
                r.export_node(node_at(arg<py::object>(args, 0)));
                return nullptr;
            case Call::GroupExports:
                r.group_exports(arg<int>(args, 0));
                return nullptr;
            default:
                throw py::value_error("replay_tree: not a method of the root");
        }
    }

    static GuardManager *call_node(GuardManager &n, Call what, const py::tuple &args) {
        switch (what) {
            case Call::Attr: return n.attr(arg<py::str>(args, 0));
            case Call::GenericAttr: return n.generic_attr(arg<py::str>(args, 0));
            case Call::Item: return n.item(arg<py::object>(args, 0));
            case Call::DictKey: return n.dict_key(arg<Py_ssize_t>(args, 0));
            case Call::DictValue: return n.dict_value(arg<Py_ssize_t>(args, 0));
            case Call::TupleIteratorRest: return n.tuple_iterator_rest();
            case Call::WeakRefCall: return n.weakref_call();
            case Call::TensorProperty:
                return n.tensor_property(arg<std::string>(args, 0), args.size() > 1 ? arg<Py_ssize_t>(args, 1) : 0);
            case Call::TypeMatch: n.add_type_match(arg<py::object>(args, 0), arg<std::string>(args, 1)); break;
            case Call::IdMatch: n.add_id_match(arg<py::object>(args, 0), arg<std::string>(args, 1)); break;
            case Call::EqualsMatch: n.add_equals_match(arg<py::object>(args, 0), arg<std::string>(args, 1)); break;
            case Call::NoneMatch: n.add_none_match(arg<std::string>(args, 0)); break;
            case Call::NotNoneMatch: n.add_not_none_match(arg<std::string>(args, 0)); break;
            case Call::LenMatch: n.add_len_match(arg<Py_ssize_t>(args, 0), arg<std::string>(args, 1)); break;
            case Call::AttrsLenMatch:
                n.add_attrs_len_match(arg<std::vector<py::str>>(args, 0), arg<std::vector<Py_ssize_t>>(args, 1),
                                      arg<std::string>(args, 2));
                break;
            case Call::DictKeysMatch: n.add_dict_keys_match(arg<py::tuple>(args, 0), arg<std::string>(args, 1)); break;
            case Call::DictKeysIdMatch:
                n.add_dict_keys_id_match(arg<py::tuple>(args, 0), arg<std::vector<bool>>(args, 1),
                                         arg<std::string>(args, 2));
                break;
            case Call::HasattrMatch:
                n.add_hasattr_match(arg<py::str>(args, 0), arg<bool>(args, 1), arg<std::string>(args, 2));
                break;
            case Call::ClassAttrMatch:
                n.add_class_attr_match(arg<py::str>(args, 0), arg<py::object>(args, 1), arg<bool>(args, 2),
                                       arg<std::string>(args, 3));
                break;
            case Call::DictContainsMatch:
                n.add_dict_contains_match(arg<py::object>(args, 0), arg<bool>(args, 1), arg<std::string>(args, 2));
                break;
            case Call::TensorMatch:
                n.add_tensor_match(arg<py::object>(args, 0), arg<py::object>(args, 1), arg<py::object>(args, 2),
                                   arg<std::vector<int64_t>>(args, 3), arg<std::vector<int64_t>>(args, 4),
                                   arg<bool>(args, 5), arg<std::string>(args, 6),
                                   args.size() > 7 ? arg<int64_t>(args, 7) : -1,
                                   args.size() > 8 ? arg<int64_t>(args, 8) : -1);
                break;
            default:
                throw py::value_error("replay_tree: a method of the root called on a node");
        }
        return nullptr;
    }

    RootGuardManager &root_;
    std::vector<GuardManager *> made_;  // [0]: the root (not a GuardManager)
};

void bind_replay(py::module_ &m) {
    m.def("replay_tree", [](RootGuardManager &root, const py::iterable &calls) {
              Replay replay(root);
              for (py::handle call : calls) {
                  auto fields = py::reinterpret_borrow<py::tuple>(call);
                  if (!PyTuple_Check(call.ptr()) || fields.size() < 3) {
                      throw py::type_error("replay_tree: each call is a tuple (node, method, args, ...)");
                  }
                  replay.call(fields[0].cast<Py_ssize_t>(), fields[1].cast<std::string>(),
                              fields[2].cast<py::tuple>());
              }
          }, py::arg("root"), py::arg("calls"),
          "make on `root` the calls recorded by pyframe/warm/tree.py: (node index, method, args, ...) "
          "tuples, 0 the root and each node a call makes the next index; nodes in args by index");
}

}  // namespace

void bind_guards(py::module_ &m) {
    bind_tuple_iterator_rest(m);
    bind_weakref_referent(m);
    bind_guard_manager(m);
    bind_root_guard_manager(m);
    bind_replay(m);
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
