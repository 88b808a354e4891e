// guards.h - shared by the C++ files of the guard trees (not part of the C/C++ interface,
// which is pyframe.h):
//   leaves.cpp        the leaf checks (TYPE_MATCH, ID_MATCH, ...), behind factories
//   torch_leaves.cpp  TENSOR_MATCH and the torch global-state leaves (the one file that
//                     includes torch's headers)
//   guard_tree.h      the tree (GuardManager, RootGuardManager), defined in guard_check.cpp (the
//                     hot path), guard_build.cpp, guard_snapshot.cpp and guard_bindings.cpp
#ifndef PYFRAME_GUARDS_H
#define PYFRAME_GUARDS_H

#include "pyframe.h"

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pyframe {

namespace py = pybind11;

// What a leaf looks at, which decides whether a subtree may be skipped while nothing in it
// changed (guard_snapshot.h, "Unchanged subtrees"):
//   Identity  the object's identity (ID_MATCH)
//   Type      its type (TYPE_MATCH)
//   Tensor    a tensor's metadata (TENSOR_MATCH)
//   Value     its value (EQUALS_MATCH, LEN, NONE, global state)
//   Keys      a dict's keys in order (DICT_KEYS, DICT_KEYS_ID): an OrderedDict's order changes
//             (move_to_end) without a new dict version
//   Attribute whether it has an attribute (HASATTR): its type and its instance dict
//   Lengths   the lengths of some of its attributes (ATTRS_LEN_MATCH: a module's hook tables):
//             each attribute as an attribute child's fetch, each length as LEN's (attrs())
enum class LeafKind : uint8_t { Identity, Type, Tensor, Value, Keys, Attribute, Lengths };

// One check on one value. Leaves hold their Python objects as py::object (destroyed with the
// tree, under the GIL) and use the raw CPython API in check(): it runs on every cached call.
class Leaf {
public:
    explicit Leaf(std::string text) : text_(std::move(text)) {}
    virtual ~Leaf() = default;
    Leaf(const Leaf &) = delete;
    Leaf &operator=(const Leaf &) = delete;

    // true: passes; false: fails (a Python error may be left set; the tree clears it).
    // Root-level leaves (call matches) get value == nullptr.
    virtual bool check(PyObject *value) = 0;
    virtual LeafKind kind() const { return LeafKind::Value; }
    // The attributes of the value a Lengths leaf reads (what a snapshot records of it); none else.
    virtual const std::vector<py::str> &attrs() const {
        static const std::vector<py::str> none;
        return none;
    }
    const std::string &text() const { return text_; }

private:
    std::string text_;
};

using LeafPtr = std::unique_ptr<Leaf>;

// The leaf kinds of docs/c_layer.md section 5.
LeafPtr make_type_match(py::object tp, std::string text);
LeafPtr make_id_match(py::object obj, std::string text);
LeafPtr make_equals_match(py::object value, std::string text);
LeafPtr make_none_match(bool want_none, std::string text);
LeafPtr make_len_match(Py_ssize_t n, std::string text);
LeafPtr make_attrs_len_match(std::vector<py::str> names, std::vector<Py_ssize_t> lengths, std::string text);
LeafPtr make_dict_keys_match(py::tuple keys, std::string text);
LeafPtr make_dict_keys_id_match(py::tuple keys, std::vector<bool> by_id, std::string text);
LeafPtr make_hasattr_match(py::str name, bool expected, std::string text);
LeafPtr make_class_attr_match(py::str name, py::object expected, bool check_instance, std::string text);
LeafPtr make_dict_contains_match(py::object key, bool expected, std::string text);
LeafPtr make_call_match(py::object fn, py::object expected, std::string text);
LeafPtr make_tensor_match(py::object tp, py::object dtype, py::object device,
                          std::vector<int64_t> sizes, std::vector<int64_t> strides,
                          bool requires_grad, int64_t storage_offset, int64_t storage_nbytes,
                          std::string text);
// The storage (c10::StorageImpl) behind a tensor, or NULL for what is no tensor or has none: two
// tensors with one storage may overlap (views of one base). Never raises.
const void *tensor_storage(PyObject *v);
// A tensor's size or stride in dimension `dim` (what: 0 size, 1 stride) or its storage offset
// (what: 2), as a new Python int; NULL with an error set for what is no tensor or has no such
// dimension, and for a tensor whose sizes are symbolic.
PyObject *read_tensor_property(PyObject *v, int what, Py_ssize_t dim);
// The same as an int64 in *out: false (no error set) where read_tensor_property fails.
bool tensor_int_property(PyObject *v, int what, Py_ssize_t dim, int64_t *out);
LeafPtr make_torch_state_match(const std::string &state, py::object expected, std::string text);

// Walks the keys of a dict (or a dict subclass) in its iteration order: PyDict_Next for a dict or
// a defaultdict, the OrderedDict's own iterator for an OrderedDict (whose order move_to_end
// changes without touching the dict beneath it, nor its version).
class DictKeyWalker {
public:
    explicit DictKeyWalker(PyObject *d) : dict_(d) {
        if (PyODict_Check(d)) {
            iter_ = PyObject_GetIter(d);
            failed_ = iter_ == nullptr;
        }
    }
    ~DictKeyWalker() {
        Py_XDECREF(iter_);
        Py_XDECREF(current_);
    }
    DictKeyWalker(const DictKeyWalker &) = delete;
    DictKeyWalker &operator=(const DictKeyWalker &) = delete;

    // The next key, borrowed until the next call (the walker holds a reference); nullptr at the
    // end or on an error (then a Python error may be set).
    PyObject *next() {
        Py_CLEAR(current_);
        if (failed_) {
            return nullptr;
        }
        if (iter_ != nullptr) {
            current_ = PyIter_Next(iter_);
        } else {
            PyObject *key, *value;
            if (PyDict_Next(dict_, &pos_, &key, &value)) {
                current_ = Py_NewRef(key);
            }
        }
        return current_;
    }

private:
    PyObject *dict_;
    PyObject *iter_ = nullptr;
    PyObject *current_ = nullptr;
    Py_ssize_t pos_ = 0;
    bool failed_ = false;
};

inline std::string repr_of(py::handle obj) {
    return py::repr(obj).cast<std::string>();
}

inline std::string qualname_of(py::handle obj) {
    if (py::hasattr(obj, "__qualname__")) {
        return py::str(obj.attr("__qualname__")).cast<std::string>();
    }
    return repr_of(obj);
}

}  // namespace pyframe

#endif  // PYFRAME_GUARDS_H
