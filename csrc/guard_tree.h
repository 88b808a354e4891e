// guard_tree.h - compiled guard trees (docs/c_layer.md section 5).
//
// A RootGuardManager is a tree of GuardManager nodes. Each node fetches one value (a fast local,
// a global, a builtin, a closure cell, or an attribute/item of its parent's value) once, runs its
// leaf checks in the order they were added, then its children. Any exception while fetching or
// checking means "fails" and is cleared.
//
// cache.cpp calls pf_guards_check_frame() on every cached call with the frame's raw localsplus,
// so nothing on that path goes through pybind11: nodes and leaves (leaves.cpp) use the CPython API
// directly; pybind11 only builds trees and serves the Python-facing methods. The definitions are
// split by job:
//   guard_check.cpp     checking: fetching values, running leaves and children (the hot path)
//   guard_build.cpp     building a tree from Python, and reporting on it (first failure, texts)
//   guard_snapshot.cpp  recording the facts that let a pinned node skip its unchanged subtree
//   guard_bindings.cpp  the Python classes and the C interface of pyframe.h
#ifndef PYFRAME_GUARD_TREE_H
#define PYFRAME_GUARD_TREE_H

#include "guard_aliasing.h"
#include "guard_shapes.h"
#include "guard_snapshot.h"
#include "guards.h"

#include <memory>
#include <string>
#include <vector>

namespace pyframe {

// Where root nodes read their values: the frame's localsplus in the hook, or a dict of locals
// by name when Python calls check()/first_failure().
struct FrameView {
    PyObject *const *fast = nullptr;
    int nfast = 0;
    PyObject *f_locals = nullptr;
    PyObject *globals = nullptr;
    PyObject *builtins = nullptr;
    PyObject *closure = nullptr;  // tuple of cells, None or NULL
};

// One run of a tree: whether pinned nodes may skip, where exported values go (new references
// by export index; nullptr when the caller does not want them), and where the values whose
// identities an aliasing check compares go (new references by identity slot).
struct Run {
    bool skip_unchanged;
    std::vector<PyObject *> *exports;
    std::vector<PyObject *> *identities = nullptr;

    void put(int index, PyObject *v) const { store(exports, index, v); }
    void keep(int slot, PyObject *v) const { store(identities, slot, v); }

    static void store(std::vector<PyObject *> *values, int index, PyObject *v) {
        if (values != nullptr) {
            PyObject *&slot = (*values)[index];
            Py_XSETREF(slot, Py_NewRef(v));
        }
    }
};

// How a node fetches its value. GenericAttr: object.__getattribute__(v, name), a class's own
// Python __getattribute__ not asked. WeakRefCall: `v()` for a weakref.ref v, its referent now (None
// once dead), read without calling Python. TensorSize/TensorStride (index: the dimension) and
// TensorStorageOffset: a tensor's metadata as a Python int, read from its TensorImpl.
enum class Access : uint8_t {
    Local, Global, Builtin, Closure, GlobalsDict, Attr, GenericAttr, Item, DictKey, DictValue, TupleIterRest,
    WeakRefCall, TensorSize, TensorStride, TensorStorageOffset
};

class GuardManager {
public:
    GuardManager(Access access, py::object key, Py_ssize_t index, std::string source);
    GuardManager(const GuardManager &) = delete;
    GuardManager &operator=(const GuardManager &) = delete;

    const std::string &source() const { return source_; }

    // -- building (guard_build.cpp) --
    GuardManager *attr(const py::str &name);
    GuardManager *generic_attr(const py::str &name);
    GuardManager *item(const py::object &key);
    // The index-th key of a dict, and its value, in the dict's iteration order: keys that are
    // not constants (tensors, modules...), which a child cannot name by value.
    GuardManager *dict_key(Py_ssize_t index);
    GuardManager *dict_value(Py_ssize_t index);
    // The items a tuple iterator has still to give, as a tuple (an iterator a loop hands to a
    // resume function): its items and length are guarded as a tuple's.
    GuardManager *tuple_iterator_rest();
    // `v()` for a weakref.ref v: the referent as it is now, None once it died (a value a module
    // keeps weakly: nn.LSTM's _flat_weight_refs). Not a weakref.ref: the fetch fails.
    GuardManager *weakref_call();
    // A tensor's size or stride in dimension `dim`, or its storage offset (`what`: "size",
    // "stride", "storage_offset"): the inputs of symbolic-shape checks and of graphs with
    // dynamic shapes.
    GuardManager *tensor_property(const std::string &what, Py_ssize_t dim);
    static GuardManager *find_or_add(std::vector<std::unique_ptr<GuardManager>> &nodes, Access access,
                                     const py::object &key, Py_ssize_t index, std::string source);

    void add_type_match(py::object tp, std::string text);
    void add_id_match(py::object obj, std::string text);
    void add_equals_match(py::object value, std::string text);
    void add_none_match(std::string text);
    void add_not_none_match(std::string text);
    void add_len_match(Py_ssize_t n, std::string text);
    void add_attrs_len_match(std::vector<py::str> names, std::vector<Py_ssize_t> lengths, std::string text);
    void add_dict_keys_match(py::tuple keys, std::string text);
    void add_dict_keys_id_match(py::tuple keys, std::vector<bool> by_id, std::string text);
    void add_hasattr_match(py::str name, bool expected, std::string text);
    void add_class_attr_match(py::str name, py::object expected, bool check_instance, std::string text);
    void add_dict_contains_match(py::object key, bool expected, std::string text);
    void add_tensor_match(py::object tp, py::object dtype, py::object device, std::vector<int64_t> sizes,
                          std::vector<int64_t> strides, bool requires_grad, std::string text,
                          int64_t storage_offset, int64_t storage_nbytes);

    int export_index() const { return export_index_; }
    void set_export_index(int index) { export_index_ = index; }
    int identity_slot() const { return identity_slot_; }
    void set_identity_slot(int slot) { identity_slot_ = slot; }

    // -- checking (guard_check.cpp) --
    // The value of a root node (Local/Global/Builtin/Closure) in `fv`: new reference, or NULL
    // when it is absent (an error may be set).
    PyObject *fetch_root(const FrameView &fv) const;
    // The value of an Attr/Item node given its parent's value: new reference or NULL.
    PyObject *fetch_from(PyObject *parent) const;
    // Leaves first (in the order added), then children. false on the first failure.
    // `record`: the snapshot of an enclosing pinned node being recorded (its facts about this
    // subtree go there).
    bool check_value(PyObject *v, const Run &run, Snapshot *record) const;

    // -- reporting (guard_build.cpp; snapshots in guard_snapshot.cpp) --
    // The text of the first failing check below this node (nullptr if everything passes).
    const std::string *first_failure_value(PyObject *v) const;
    // When this node's value cannot be fetched, every check below it fails: report the first.
    const std::string *unreadable_text();
    void collect_texts(std::vector<std::string> &out) const;
    std::vector<std::string> texts() const;
    // For study: every pinned node below (and at) this one, with what its snapshot holds.
    void collect_snapshots(py::list &out) const;

private:
    bool check_children(PyObject *v, const Run &run, Snapshot *record) const;
    bool check_pinned_subtree(PyObject *v, const Run &run, Snapshot *record) const;
    PyObject *fetch_entry(PyObject *parent) const;
    PyObject *lookup(PyObject *mapping) const;

    // What the checks of this node (its leaves, and the fetches of its children) rely on, and
    // what tells a later check that `child`'s fetch from v still gives `value`.
    void record_facts(PyObject *v, Snapshot &s) const;
    static void record_attr(PyObject *v, const GuardManager &child, PyObject *value, Snapshot &s);

    bool is_attr() const { return access_ == Access::Attr || access_ == Access::GenericAttr; }
    // Who has a subtree to skip while it is unchanged: a node whose identity an ID_MATCH pins,
    // or whose TYPE_MATCH checks a kind of object that can be weakly referenced (an nn.Module,
    // guarded by type as torch._dynamo guards it): its snapshot then also names the object it
    // was recorded for, by a weak reference, and holds only for that same object.
    bool pinned() const { return (pins_identity_ || pins_type_) && !children_.empty(); }
    bool same_key(Access access, const py::object &key, Py_ssize_t index) const;
    GuardManager *child(Access access, const py::object &key, Py_ssize_t index, std::string source);
    void add(LeafPtr leaf);
    std::string key_text(Py_ssize_t index) const;
    const std::string *first_text() const;

    Access access_;
    py::object key_;
    Py_ssize_t index_;
    std::string source_;
    bool generic_;  // fetched by object's lookup (see fetch_from)
    std::string unreadable_;
    std::vector<LeafPtr> leaves_;
    std::vector<std::unique_ptr<GuardManager>> children_;
    int export_index_ = -1;  // this node's value is export number `export_index_` (see Run)
    int identity_slot_ = -1;  // an aliasing check reads this node's value from this slot (see Run)
    // DictKey/DictValue: the entry last fetched, and the dict (address, version) it is valid for.
    mutable PyObject *entry_dict_ = nullptr;
    mutable unsigned long long entry_version_ = 0;
    mutable PyObject *entry_key_ = nullptr;
    mutable PyObject *entry_value_ = nullptr;
    bool pins_identity_ = false;
    bool pins_type_ = false;
    bool has_item_children_ = false;
    bool has_position_children_ = false;
    // Recorded by check_value (a cache of facts, not part of the tree's meaning).
    mutable Snapshot snapshot_;
    mutable bool snapshot_valid_ = false;
    // The last full check passed but read facts no snapshot covers (a list's items, a value
    // compared by == that can change in place...): later checks do not record one again.
    mutable bool never_safe_ = false;
};

class RootGuardManager {
public:
    explicit RootGuardManager(bool skip_unchanged = true) : skip_unchanged_(skip_unchanged) {}
    RootGuardManager(const RootGuardManager &) = delete;
    RootGuardManager &operator=(const RootGuardManager &) = delete;

    // -- building (guard_build.cpp) --
    GuardManager *local(const py::str &name, Py_ssize_t index);
    GuardManager *global_(const py::str &name);
    GuardManager *globals_dict();
    GuardManager *builtin(const py::str &name);
    GuardManager *closure(Py_ssize_t index);
    void add_call_match(py::object fn, py::object expected, std::string text);
    void add_torch_state_match(const std::string &state, py::object expected, std::string text);
    // Mark `node` (a node of this tree) as exported; returns its index in the exports tuple.
    int export_node(GuardManager *node);
    int export_count() const { return n_exports_; }
    // The first `n` exports (a graph's arguments) in a tuple of their own, the exports tuple then
    // being (that tuple, the other exports...): the graph call takes it as it is.
    void group_exports(int n);
    // aliasing(nodes...) == classes (AliasingMatch): the nodes' values are one object where the
    // classes are equal, distinct objects elsewhere. Checked after the whole tree passed.
    void add_aliasing_match(const std::vector<GuardManager *> &nodes, std::vector<int> classes,
                            std::string text, std::vector<int> storage_classes);
    // program(nodes...) is true (ShapeMatch): a relation between ints read from the nodes' values
    // (an int argument, a tensor's sizes: `reads`). Checked after the whole tree passed.
    void add_shape_match(const std::vector<GuardManager *> &nodes, std::vector<int64_t> program,
                         std::string text, const std::vector<std::pair<std::string, Py_ssize_t>> &reads);

    // -- checking (guard_check.cpp) --
    // The hot path. Never leaves an exception set. With `exports` (and something exported), a
    // pass also sets *exports to the tuple of exported values (new reference).
    bool check_frame(const FrameView &fv, PyObject **exports = nullptr) const;

    // -- reporting (guard_build.cpp) --
    const std::string *first_failure(const FrameView &fv);
    py::list snapshots() const;
    std::vector<std::string> texts() const;

private:
    // The tree, then the aliasing and shape checks on the values it read.
    bool run(const FrameView &fv, const Run &how) const;
    bool run_tree(const FrameView &fv, const Run &how) const;
    const std::string *first_failure_of_tree(const FrameView &fv);
    static void release(std::vector<PyObject *> &values) {
        for (PyObject *&v : values) {
            Py_CLEAR(v);
        }
    }
    static bool finish(bool ok) {
        if (!ok && PyErr_Occurred()) {
            PyErr_Clear();
        }
        return ok;
    }

    bool skip_unchanged_;
    int n_exports_ = 0;
    int grouped_ = 0;  // group_exports
    int n_identities_ = 0;
    std::vector<AliasingMatch> aliasing_;
    std::vector<ShapeMatch> shapes_;
    // The identity slot of `node`, given one on first use.
    int slot_of(GuardManager *node);
    mutable std::vector<PyObject *> scratch_;  // the exports of the running check
    mutable bool scratch_busy_ = false;
    mutable std::vector<PyObject *> identities_;  // the identity slots of the running check
    mutable bool identities_busy_ = false;
    std::vector<LeafPtr> leaves_;  // call matches (global state)
    std::vector<std::unique_ptr<GuardManager>> roots_;
};

}  // namespace pyframe

#endif  // PYFRAME_GUARD_TREE_H
