// guards.cpp - compiled guard trees (docs/c_layer.md section 5).
//
// A RootGuardManager is a tree of GuardManager nodes. Each node fetches one value (a fast local,
// a global, a builtin, a closure cell, or an attribute/item of its parent's value) once, runs its
// leaf checks in the order they were added, then its children. Any exception while fetching or
// checking means "fails" and is cleared.
//
// The hook calls pf_guards_check_frame() on every cached call with the frame's raw localsplus,
// so nothing here goes through pybind11 on that path: nodes and leaves (leaves.cpp) use the
// CPython API directly; pybind11 only builds trees and serves the Python-facing methods.
#include "guards.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

namespace py = pybind11;

namespace pyframe {

class GuardManager;
PyObject *pf_fetch_child(const GuardManager *child, PyObject *parent);  // (defined after it)

namespace {

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

// ---- unchanged subtrees ------------------------------------------------------------------------
//
// A node whose value is pinned by an ID_MATCH (a module, say) may skip its whole subtree on later
// checks while nothing the subtree read has changed. The first check that runs the subtree in full
// and passes also records a Snapshot: for every object whose attributes it read, the object's
// type (and the type's version tag) and its instance dict's version; for every dict whose items
// it read or whose value it checked, that dict's version. CPython changes a dict's version on
// every change of its contents and a type's version tag on every change of the type or its
// bases, so while the snapshot holds, every value the subtree would fetch is the same object as
// last time, and every check on it gives the same answer, provided that:
//   * each attribute came from the instance dict (no property or other data descriptor, no
//     Python __getattribute__), each item from an exact dict, an OrderedDict or a tuple;
//   * each value checked by its value (==, len, is None) is immutable, or a dict or OrderedDict
//     (versioned);
//   * tensors are not changed in place in ways a TENSOR_MATCH sees (`p.data = other`,
//     `p.requires_grad_()` on a parameter): the one assumption, the same one torch._dynamo makes
//     by default (skip_tensor_guards_with_matching_dict_tags).
// An attribute that does not come from an instance dict (a class's attribute, a function's
// `__globals__` or `__closure__`, a cell's contents, one found by a Python __getattribute__) is an
// *anchor*: the snapshot holds a reference to the value it fetched, and on later checks fetches it
// again and compares identities; the same object means the facts recorded beneath it still stand.
// A subtree that breaks one of the other rules records an unsafe snapshot and is always checked
// in full. The facts are checked parent first, so each object a fact names is alive when it is
// read: the root object by its ID_MATCH, an anchored value by the snapshot's own reference, every
// other one because the dict holding it did not change.

struct Tag {
    PyObject *obj;                    // borrowed (see above); for an anchor, the value it fetched
    PyTypeObject *type;               // nullptr: the type is not part of this fact
    unsigned int type_version;
    PyObject *dict;                   // obj's instance dict, or obj itself; nullptr: none
    PyObject **dict_slot;             // where obj keeps its instance dict; nullptr: dict is obj
    unsigned long long dict_version;
    const GuardManager *anchor = nullptr;  // an anchor: `anchor` fetched from `anchor_parent`
    PyObject *anchor_parent = nullptr;

    bool own_version = false;  // obj is a class whose own version tag is `type_version`
    PyObject **field = nullptr;  // a field of obj's struct (pf_attr_field) that must still hold...
    PyObject *field_value = nullptr;  // ...this pointer (borrowed: obj's field holds it)

    static Tag anchored(const GuardManager *child, PyObject *parent, PyObject *value) {
        return Tag{value, nullptr, 0, nullptr, nullptr, 0, child, parent};
    }
    static Tag class_version(PyTypeObject *cls) {
        return Tag{(PyObject *)cls, nullptr, cls->tp_version_tag, nullptr, nullptr, 0, nullptr, nullptr, true};
    }

    static Tag in_field(PyObject *obj, PyObject **field) {
        Tag t{obj, nullptr, 0, nullptr, nullptr, 0};
        t.field = field;
        t.field_value = *field;
        return t;
    }

    bool holds() const {
        if (field != nullptr) {
            return *field == field_value;
        }
        if (own_version) {
            return ((PyTypeObject *)obj)->tp_version_tag == type_version;
        }
        if (anchor != nullptr) {
            PyObject *now = pf_fetch_child(anchor, anchor_parent);
            if (now == nullptr) {
                PyErr_Clear();
                return false;
            }
            Py_DECREF(now);
            return now == obj;
        }
        if (type != nullptr && (Py_TYPE(obj) != type || type->tp_version_tag != type_version)) {
            return false;
        }
        if (dict != nullptr) {
            if (dict_slot != nullptr && *dict_slot != dict) {
                return false;  // a new __dict__ was assigned
            }
            return pf_dict_version(dict) == dict_version;
        }
        return true;
    }
};

struct Snapshot {
    std::vector<Tag> tags;  // parent first
    std::vector<std::pair<int, PyObject *>> exports;  // (export index, borrowed value) below
    std::vector<std::pair<int, PyObject *>> identities;  // (identity slot, borrowed value) below
    std::vector<py::object> anchored;  // the values anchors fetched, kept alive (no reuse of an id)
    bool safe = true;

    void anchor(const GuardManager *child, PyObject *parent, PyObject *value) {
        tags.push_back(Tag::anchored(child, parent, value));
        anchored.push_back(py::reinterpret_borrow<py::object>(value));
    }

    void append(const Snapshot &inner) {
        safe = safe && inner.safe;
        tags.insert(tags.end(), inner.tags.begin(), inner.tags.end());
        anchored.insert(anchored.end(), inner.anchored.begin(), inner.anchored.end());
        exports.insert(exports.end(), inner.exports.begin(), inner.exports.end());
        identities.insert(identities.end(), inner.identities.begin(), inner.identities.end());
    }

    // Keep the first of equal facts (a class, a module's globals... met on many paths): order
    // stays parent first, since a repeat's parents came before it and the first one's before it.
    void drop_repeats() {
        std::set<std::tuple<PyObject *, PyTypeObject *, PyObject *, const GuardManager *, bool, PyObject **>> seen;
        std::vector<Tag> kept;
        kept.reserve(tags.size());
        for (const Tag &t : tags) {
            if (seen.emplace(t.obj, t.type, t.dict, t.anchor, t.own_version, t.field).second) {
                kept.push_back(t);
            }
        }
        tags = std::move(kept);
    }

    bool holds() const {
        for (const Tag &t : tags) {
            if (!t.holds()) {
                return false;
            }
        }
        return true;
    }
    void type_of(PyObject *obj) {
        if (!try_type_of(obj)) {
            safe = false;
        }
    }
    // type(obj) and its version (everything found through its MRO), if it has a valid one.
    bool try_type_of(PyObject *obj) {
        PyTypeObject *tp = Py_TYPE(obj);
        if (!PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG)) {
            return false;
        }
        tags.push_back(Tag{obj, tp, tp->tp_version_tag, nullptr, nullptr, 0});
        return true;
    }
    // The class `cls`'s own version: what a lookup through its MRO finds.
    bool try_class_version(PyObject *cls) {
        if (!PyType_HasFeature((PyTypeObject *)cls, Py_TPFLAGS_VALID_VERSION_TAG)) {
            return false;
        }
        tags.push_back(Tag::class_version((PyTypeObject *)cls));
        return true;
    }
    void dict(PyObject *d) { tags.push_back(Tag{d, nullptr, 0, d, nullptr, pf_dict_version(d)}); }
};

// A dict whose contents change only through CPython's dict code, which bumps its version: a
// dict, or an OrderedDict (nn.Module's hook tables; its C implementation stores into the dict).
bool is_versioned_dict(PyObject *v) { return PyDict_CheckExact(v) || PyODict_CheckExact(v); }

// A dict whose keys change order only through CPython's dict code: any dict (a subclass's keys
// are walked in its storage) but an OrderedDict, whose move_to_end keeps the version.
bool order_is_versioned(PyObject *v) { return PyDict_Check(v) && !PyODict_Check(v); }

bool is_immutable(PyObject *v) {
    if (v == Py_None || PyBool_Check(v) || PyLong_CheckExact(v) || PyFloat_CheckExact(v) ||
        PyUnicode_CheckExact(v) || PyBytes_CheckExact(v) || PyComplex_CheckExact(v)) {
        return true;
    }
    if (PyTuple_CheckExact(v)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v); i++) {
            if (!is_immutable(PyTuple_GET_ITEM(v, i))) {
                return false;
            }
        }
        return true;
    }
    return false;
}

// Does getattr(obj, name) (object.__getattribute__(obj, name) if `generic`) return the instance
// dict's entry (so the dict's version covers it)?
// Whether getattr on an instance of tp finds what object's lookup finds (a Python __getattr__ is
// fine: it runs only on misses). `generic`: the guard reads by object's lookup anyway.
bool lookup_is_objects(PyTypeObject *tp, bool generic) {
    static PyObject *getattribute = PyUnicode_InternFromString("__getattribute__");
    static PyObject *object_getattribute = _PyType_Lookup(&PyBaseObject_Type, getattribute);
    // (a module's lookup is object's, then the module's __getattr__ on a miss)
    return generic || tp->tp_getattro == PyObject_GenericGetAttr || tp->tp_getattro == PyModule_Type.tp_getattro ||
           _PyType_Lookup(tp, getattribute) == object_getattribute;
}

bool attr_is_from_instance_dict(PyObject *obj, PyObject *name, PyObject *value, bool generic) {
    PyTypeObject *tp = Py_TYPE(obj);
    if (!lookup_is_objects(tp, generic)) {
        return false;  // a Python __getattribute__
    }
    PyObject *descr = _PyType_Lookup(tp, name);
    if (descr != nullptr && Py_TYPE(descr)->tp_descr_set != nullptr) {
        return false;  // a data descriptor wins over the instance dict
    }
    PyObject *dict = pf_instance_dict(obj);
    if (dict == nullptr) {
        return false;
    }
    PyObject *found = PyDict_GetItemWithError(dict, name);
    if (found == nullptr) {
        PyErr_Clear();
    }
    return found == value;
}

PyObject *co_prefix() {
    static PyObject *prefix = PyUnicode_InternFromString("co_");
    return prefix;
}

// An attribute no store can change while obj lives: a function's __globals__, __closure__ and
// __builtins__, a bound method's __func__ and __self__ (read-only members), a code object's co_* data (not its methods).
bool attr_is_fixed(PyObject *obj, PyObject *name) {
    if (PyFunction_Check(obj)) {
        return PyUnicode_CompareWithASCIIString(name, "__globals__") == 0 ||
               PyUnicode_CompareWithASCIIString(name, "__closure__") == 0 ||
               PyUnicode_CompareWithASCIIString(name, "__builtins__") == 0;
    }
    if (PyMethod_Check(obj)) {
        return PyUnicode_CompareWithASCIIString(name, "__func__") == 0 ||
               PyUnicode_CompareWithASCIIString(name, "__self__") == 0;
    }
    if (!PyCode_Check(obj) || PyUnicode_Tailmatch(name, co_prefix(), 0, PY_SSIZE_T_MAX, -1) != 1) {
        return false;
    }
    // (a member or a getter: `co_lines` and `co_positions` are methods, bound anew on each read)
    PyObject *descr = _PyType_Lookup(&PyCode_Type, name);
    return descr != nullptr && (Py_IS_TYPE(descr, &PyMemberDescr_Type) || Py_IS_TYPE(descr, &PyGetSetDescr_Type));
}

// Does `tp`'s MRO give `name` as object's own attribute (`__class__`: object's descriptor)?
bool class_is_objects(PyTypeObject *tp, PyObject *name) {
    PyObject *found = _PyType_Lookup(tp, name);
    return found != nullptr && found == _PyType_Lookup(&PyBaseObject_Type, name);
}

// Is `cls.name` (cls a class) `value` as found in cls's MRO, by type's own lookup (no attribute
// of the metaclass under that name), through no descriptor but a function's or a property's
// (which give themselves back on a class)? Then cls's version and its metaclass's cover it.
bool class_attr_is_plain(PyObject *cls, PyObject *name, PyObject *value) {
    PyTypeObject *meta = Py_TYPE(cls);
    if (meta->tp_getattro != PyType_Type.tp_getattro) {
        return false;
    }
    PyObject *meta_attr = _PyType_Lookup(meta, name);  // (type's own `__init__`, `__setattr__`...)
    if (meta_attr != nullptr && Py_TYPE(meta_attr)->tp_descr_set != nullptr) {
        return false;  // a data descriptor of the metaclass wins over the class's MRO
    }
    PyObject *found = _PyType_Lookup((PyTypeObject *)cls, name);
    if (found != value) {
        return false;
    }
    return Py_TYPE(found)->tp_descr_get == nullptr || PyFunction_Check(found) || Py_IS_TYPE(found, &PyProperty_Type);
}

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

// aliasing(s_1, ..., s_n) == [c_1, ..., c_n]: the values at these sources are one object where
// the classes are equal and distinct objects where they differ (a trace that compared tensors of
// the frame by identity, as dict keys, holds for no other arrangement). O(n + k^2) for k classes
// up to 32, O(n + k log k) past that; no allocation in the common case.
struct AliasingMatch {
    std::vector<int> slots;    // identity slots of the sources' nodes
    std::vector<int> classes;  // one per slot
    std::string text;
    int n_classes = 0;
    // One per slot, or empty: the values are tensors on one storage where these are equal and on
    // distinct storages where they differ. Two distinct tensors can still overlap in memory
    // (`base[0:4]`, `base[2:6]`), and a functionalized graph traced for separate storages
    // computes something else for them.
    std::vector<int> storage_classes;
    int n_storage_classes = 0;

    bool check(const std::vector<PyObject *> &values) const {
        auto object = [&](size_t i) -> const void * { return values[slots[i]]; };
        if (!partition_holds(classes, n_classes, object)) {
            return false;
        }
        // (every value is there now.) A value with no storage (no tensor) is its own storage.
        auto storage = [&](size_t i) -> const void * {
            const void *s = tensor_storage(values[slots[i]]);
            return s != nullptr ? s : values[slots[i]];
        };
        return storage_classes.empty() || partition_holds(storage_classes, n_storage_classes, storage);
    }

    // Classes are numbered in order of first appearance (see number_by_first_appearance), so the
    // first member of each class is met before the others: each later member must be its class's
    // first (one class, one key), and each first must differ from every earlier class's (one key,
    // one class). No allocation up to kPairwise classes; past that, the firsts are sorted.
    static constexpr size_t kPairwise = 32;

    template <typename Key>
    static bool partition_holds(const std::vector<int> &classes, int count, Key key) {
        const void *small[kPairwise];
        std::vector<const void *> large;
        const void **firsts = small;
        if (static_cast<size_t>(count) > kPairwise) {
            large.resize(count);
            firsts = large.data();
        }
        int n_classes = 0;
        for (size_t i = 0; i < classes.size(); i++) {
            const void *k = key(i);
            if (k == nullptr) {
                return false;
            }
            if (classes[i] < n_classes) {
                if (firsts[classes[i]] != k) {
                    return false;
                }
                continue;
            }
            firsts[n_classes++] = k;
            if (large.empty()) {
                for (int j = 0; j + 1 < n_classes; j++) {
                    if (firsts[j] == k) {
                        return false;
                    }
                }
            }
        }
        if (!large.empty()) {
            std::sort(large.begin(), large.begin() + n_classes);
            return std::adjacent_find(large.begin(), large.begin() + n_classes) == large.begin() + n_classes;
        }
        return true;
    }

    // The same partition, each class numbered when first met (0, 1, 2...): the form
    // partition_holds reads.
    static std::vector<int> number_by_first_appearance(const std::vector<int> &classes) {
        std::vector<int> out;
        std::vector<int> given;  // given[n]: the class numbered n
        for (int c : classes) {
            auto it = std::find(given.begin(), given.end(), c);
            out.push_back(static_cast<int>(it - given.begin()));
            if (it == given.end()) {
                given.push_back(c);
            }
        }
        return out;
    }
};

}  // namespace

// ---- nodes ------------------------------------------------------------------------------------

// GenericAttr: object.__getattribute__(v, name), a class's own Python __getattribute__ not asked.
enum class Access : uint8_t {
    Local, Global, Builtin, Closure, GlobalsDict, Attr, GenericAttr, Item, DictKey, DictValue, TupleIterRest
};

class GuardManager {
public:
    GuardManager(Access access, py::object key, Py_ssize_t index, std::string source)
        : access_(access), key_(std::move(key)), index_(index), source_(std::move(source)),
          generic_(access == Access::GenericAttr ||
                   (access == Access::Attr && PyUnicode_Check(key_.ptr()) &&
                    (PyUnicode_CompareWithASCIIString(key_.ptr(), "__class__") == 0 ||
                     PyUnicode_CompareWithASCIIString(key_.ptr(), "__dict__") == 0))) {}
    GuardManager(const GuardManager &) = delete;
    GuardManager &operator=(const GuardManager &) = delete;

    const std::string &source() const { return source_; }

    GuardManager *attr(const py::str &name) {
        return child(Access::Attr, name, 0, source_ + "." + name.cast<std::string>());
    }
    GuardManager *generic_attr(const py::str &name) {
        return child(Access::GenericAttr, name, 0,
                     "object.__getattribute__(" + source_ + ", " + repr_of(name) + ")");
    }
    GuardManager *item(const py::object &key) {
        return child(Access::Item, key, 0, source_ + "[" + repr_of(key) + "]");
    }
    // The index-th key of a dict, and its value, in the dict's iteration order: keys that are
    // not constants (tensors, modules...), which a child cannot name by value.
    GuardManager *dict_key(Py_ssize_t index) {
        check_index(index);
        return child(Access::DictKey, py::none(), index, key_text(index));
    }
    GuardManager *dict_value(Py_ssize_t index) {
        check_index(index);
        return child(Access::DictValue, py::none(), index, source_ + "[" + key_text(index) + "]");
    }

    // The items a tuple iterator has still to give, as a tuple (an iterator a loop hands to a
    // resume function): its items and length are guarded as a tuple's.
    GuardManager *tuple_iterator_rest() {
        return child(Access::TupleIterRest, py::none(), 0, "___tuple_iterator_rest(" + source_ + ")");
    }

    void add_type_match(py::object tp, std::string text) {
        if (text.empty()) {
            text = "type(" + source_ + ") is " + qualname_of(tp);
        }
        add(make_type_match(std::move(tp), std::move(text)));
    }
    void add_id_match(py::object obj, std::string text) {
        if (text.empty()) {
            text = source_ + " is " + repr_of(obj);
        }
        add(make_id_match(std::move(obj), std::move(text)));
    }
    void add_equals_match(py::object value, std::string text) {
        if (text.empty()) {
            text = source_ + " == " + repr_of(value);
        }
        add(make_equals_match(std::move(value), std::move(text)));
    }
    void add_none_match(std::string text) {
        add(make_none_match(true, text.empty() ? source_ + " is None" : text));
    }
    void add_not_none_match(std::string text) {
        add(make_none_match(false, text.empty() ? source_ + " is not None" : text));
    }
    void add_len_match(Py_ssize_t n, std::string text) {
        if (text.empty()) {
            text = "len(" + source_ + ") == " + std::to_string(n);
        }
        add(make_len_match(n, std::move(text)));
    }
    void add_dict_keys_match(py::tuple keys, std::string text) {
        if (text.empty()) {
            text = "tuple(" + source_ + ".keys()) == " + repr_of(keys);
        }
        add(make_dict_keys_match(std::move(keys), std::move(text)));
    }
    void add_dict_keys_id_match(py::tuple keys, std::vector<bool> by_id, std::string text) {
        if (text.empty()) {
            text = "keys_by_id(" + source_ + ") == " + repr_of(keys);
        }
        add(make_dict_keys_id_match(std::move(keys), std::move(by_id), std::move(text)));
    }
    void add_hasattr_match(py::str name, bool expected, std::string text) {
        if (text.empty()) {
            text = std::string(expected ? "" : "not ") + "hasattr(" + source_ + ", " + repr_of(name) + ")";
        }
        add(make_hasattr_match(std::move(name), expected, std::move(text)));
    }
    void add_class_attr_match(py::str name, py::object expected, bool check_instance, std::string text) {
        add(make_class_attr_match(std::move(name), std::move(expected), check_instance, std::move(text)));
    }
    void add_dict_contains_match(py::object key, bool expected, std::string text) {
        if (text.empty()) {
            text = repr_of(key) + (expected ? " in " : " not in ") + source_;
        }
        add(make_dict_contains_match(std::move(key), expected, std::move(text)));
    }
    void add_tensor_match(py::object tp, py::object dtype, py::object device,
                          std::vector<int64_t> sizes, std::vector<int64_t> strides,
                          bool requires_grad, std::string text, int64_t storage_offset,
                          int64_t storage_nbytes) {
        if (text.empty()) {
            text = "check_tensor(" + source_ + ", " + qualname_of(tp) + ", " + repr_of(dtype) +
                   ", " + repr_of(device) + ", size=" + repr_of(py::cast(sizes)) +
                   ", stride=" + repr_of(py::cast(strides)) +
                   ", requires_grad=" + (requires_grad ? "True" : "False") + ")";
        }
        add(make_tensor_match(std::move(tp), std::move(dtype), std::move(device),
                              std::move(sizes), std::move(strides), requires_grad,
                              storage_offset, storage_nbytes, std::move(text)));
    }

    // The value of a root node (Local/Global/Builtin/Closure) in `fv`: new reference, or NULL
    // when it is absent (an error may be set).
    PyObject *fetch_root(const FrameView &fv) const {
        PyObject *v = nullptr;
        switch (access_) {
            case Access::Local:
                if (fv.fast != nullptr) {
                    v = index_ < fv.nfast ? fv.fast[index_] : nullptr;  // NULL: unbound
                    Py_XINCREF(v);
                    return v;
                }
                return lookup(fv.f_locals);
            case Access::Global:
                return lookup(fv.globals);
            case Access::Builtin:
                return lookup(fv.builtins);
            case Access::GlobalsDict:
                Py_XINCREF(fv.globals);
                return fv.globals;
            case Access::Closure:
                if (fv.closure == nullptr || !PyTuple_Check(fv.closure) ||
                    index_ >= PyTuple_GET_SIZE(fv.closure)) {
                    return nullptr;
                }
                v = PyTuple_GET_ITEM(fv.closure, index_);
                if (!PyCell_Check(v)) {
                    return nullptr;
                }
                v = PyCell_GET(v);  // NULL: empty cell
                Py_XINCREF(v);
                return v;
            default:
                return nullptr;
        }
    }

    // The value of an Attr/Item node given its parent's value: new reference or NULL.
    PyObject *fetch_from(PyObject *parent) const {
        if (access_ == Access::Attr || access_ == Access::GenericAttr) {
            // `__class__` and `__dict__` as object's lookup finds them (type(x) and the instance
            // dict, unless the class makes them data descriptors of its own), which is what the
            // translator reads them as: a class's Python __getattribute__ is not asked.
            return generic_ ? PyObject_GenericGetAttr(parent, key_.ptr()) : PyObject_GetAttr(parent, key_.ptr());
        }
        if (access_ == Access::DictKey || access_ == Access::DictValue) {
            return fetch_entry(parent);
        }
        if (access_ == Access::TupleIterRest) {
            return pf_tuple_iterator_rest(parent);
        }
        if (PyDict_Check(parent)) {  // exact lookup: no __getitem__/__missing__ call
            PyObject *v = PyDict_GetItemWithError(parent, key_.ptr());
            Py_XINCREF(v);
            return v;
        }
        return PyObject_GetItem(parent, key_.ptr());
    }

    // Leaves first (in the order added), then children. false on the first failure.
    // `skip`: a pinned node may skip its children while its snapshot holds. `record`: the
    // snapshot of an enclosing pinned node being recorded (its facts about this subtree go there).
    bool check_value(PyObject *v, const Run &run, Snapshot *record) const {
        // A pinned node checks its identity first; its other leaves (a method's class lookup, a
        // hook table's length...) read only what its snapshot records, so while the snapshot
        // holds they pass as they did and are skipped with the subtree.
        const bool may_skip = run.skip_unchanged && pinned();
        for (const auto &leaf : leaves_) {
            if (may_skip && leaf->kind() != LeafKind::Identity) {
                continue;
            }
            if (!leaf->check(v)) {
                return false;
            }
        }
        if (export_index_ >= 0) {
            run.put(export_index_, v);
            if (record != nullptr) {
                record->exports.emplace_back(export_index_, v);
            }
        }
        if (identity_slot_ >= 0) {
            run.keep(identity_slot_, v);
            if (record != nullptr) {
                record->identities.emplace_back(identity_slot_, v);
            }
        }
        if (!may_skip) {
            if (record != nullptr) {
                record_facts(v, *record);
            }
            return check_children(v, run, record);
        }
        if (snapshot_valid_ && snapshot_.holds()) {
            for (const auto &[index, value] : snapshot_.exports) {
                run.put(index, value);
            }
            for (const auto &[slot, value] : snapshot_.identities) {
                run.keep(slot, value);
            }
            if (record != nullptr) {
                record->append(snapshot_);
            }
            return true;
        }
        for (const auto &leaf : leaves_) {  // (the ones skipped above)
            if (leaf->kind() != LeafKind::Identity && !leaf->check(v)) {
                snapshot_valid_ = false;
                return false;
            }
        }
        if (never_safe_) {  // (no snapshot to record: check in full, nested snapshots still skip)
            if (record != nullptr) {
                record->safe = false;
            }
            return check_children(v, run, nullptr);
        }
        Snapshot mine;
        record_facts(v, mine);
        bool ok = check_children(v, run, &mine);
        snapshot_valid_ = ok && mine.safe;
        never_safe_ = ok && !mine.safe;
        if (record != nullptr) {
            record->append(mine);
        }
        if (snapshot_valid_) {
            mine.drop_repeats();
            snapshot_ = std::move(mine);
        }
        return ok;
    }

    bool check_children(PyObject *v, const Run &run, Snapshot *record) const {
        for (const auto &c : children_) {
            PyObject *cv = c->fetch_from(v);
            if (cv == nullptr) {
                return false;
            }
            if (record != nullptr && c->is_attr()) {
                record_attr(v, *c, cv, *record);
            }
            bool ok = c->check_value(cv, run, record);
            Py_DECREF(cv);
            if (!ok) {
                return false;
            }
        }
        return true;
    }

    // What tells a later check that `child`'s fetch from v still gives `value` (v being the same
    // object): the instance dict's version (recorded with v's facts), a member fixed for v's life,
    // a type's versions, or else an anchor (fetched again and compared by identity).
    static void record_attr(PyObject *v, const GuardManager &child, PyObject *value, Snapshot &s) {
        PyObject *name = child.key_.ptr();
        if (attr_is_from_instance_dict(v, name, value, child.generic_) || attr_is_fixed(v, name)) {
            return;
        }
        if (child.generic_ && value == (PyObject *)Py_TYPE(v) && class_is_objects(Py_TYPE(v), name) &&
            s.try_type_of(v)) {
            return;  // `v.__class__` as object's descriptor gives it: type(v), which the tag names
        }
        if (PyType_Check(v) && class_attr_is_plain(v, name, value) && s.try_type_of(v) && s.try_class_version(v)) {
            return;
        }
        if (record_field(v, name, value, child.generic_, s) || record_class_attr(v, name, value, child.generic_, s)) {
            return;
        }
        s.anchor(&child, v, value);
    }

    // An attribute kept in a field of v's struct (a function's `__code__`, a cell's contents, a
    // slot): the field still holding the same pointer (and, for a slot, type(v) unchanged).
    static bool record_field(PyObject *v, PyObject *name, PyObject *value, bool generic, Snapshot &s) {
        if (!lookup_is_objects(Py_TYPE(v), generic)) {
            return false;
        }
        PyObject **field = pf_attr_field(v, name);
        if (field == nullptr && value == pf_instance_dict(v) && PyUnicode_CompareWithASCIIString(name, "__dict__") == 0) {
            PyObject *descr = _PyType_Lookup(Py_TYPE(v), name);  // (the instance dict's own getter)
            field = descr != nullptr && Py_IS_TYPE(descr, &PyGetSetDescr_Type) ? pf_instance_dict_slot(v) : nullptr;
        }
        if (field == nullptr || !(*field == value || (*field == nullptr && value == Py_None))) {
            return false;  // (an empty __defaults__ field reads as None)
        }
        if (!PyFunction_Check(v) && !PyCell_Check(v) && !s.try_type_of(v)) {
            return false;  // (a slot's member descriptor is found through type(v))
        }
        s.tags.push_back(Tag::in_field(v, field));
        return true;
    }

    // A plain class attribute read through an instance (`layer.gradient_checkpointing` set on
    // the class): type(v)'s version and v's instance dict (which lacks the name) unchanged.
    static bool record_class_attr(PyObject *v, PyObject *name, PyObject *value, bool generic, Snapshot &s) {
        PyTypeObject *tp = Py_TYPE(v);
        if (PyType_Check(v) || !lookup_is_objects(tp, generic) || _PyType_Lookup(tp, name) != value ||
            Py_TYPE(value)->tp_descr_get != nullptr || !PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG)) {
            return false;
        }
        PyObject **slot = pf_instance_dict_slot(v);
        PyObject *dict = slot != nullptr ? *slot : nullptr;
        if (dict == nullptr || !PyDict_CheckExact(dict)) {
            return false;
        }
        PyObject *shadow = PyDict_GetItemWithError(dict, name);
        if (shadow != nullptr || PyErr_Occurred()) {
            PyErr_Clear();
            return false;
        }
        s.tags.push_back(Tag{v, tp, tp->tp_version_tag, dict, slot, pf_dict_version(dict)});
        return true;
    }

    // What the checks of this node (its leaves, and the fetches of its children) rely on.
    void record_facts(PyObject *v, Snapshot &s) const {
        bool reads_attrs = false;  // a leaf depends on v's attributes (its children are anchored
                                   // where they do not come from v's instance dict)
        for (const auto &leaf : leaves_) {
            switch (leaf->kind()) {
                case LeafKind::Value:
                    if (is_versioned_dict(v)) {
                        s.dict(v);
                    } else if (!is_immutable(v)) {
                        s.safe = false;
                    }
                    break;
                case LeafKind::Keys:  // (in order: an OrderedDict reorders without a new version)
                    if (order_is_versioned(v)) {
                        s.dict(v);
                    } else {
                        s.safe = false;
                    }
                    break;
                case LeafKind::Type:
                    if (!is_immutable(v)) {
                        s.type_of(v);  // __class__ can be reassigned
                    }
                    break;
                case LeafKind::Attribute:
                    reads_attrs = true;  // what it finds depends on the type and the instance dict
                    break;
                case LeafKind::Identity:
                case LeafKind::Tensor:
                    break;
            }
        }
        if (reads_attrs || has_attr_children_) {
            PyObject **slot = pf_instance_dict_slot(v);
            PyObject *dict = slot != nullptr ? *slot : nullptr;
            PyTypeObject *tp = Py_TYPE(v);
            if (dict == nullptr || !PyDict_CheckExact(dict) ||
                !PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG)) {
                if (reads_attrs) {
                    s.safe = false;
                }  // (else every attribute child is an anchor: nothing about v itself to record)
            } else {
                s.tags.push_back(Tag{v, tp, tp->tp_version_tag, dict, slot, pf_dict_version(dict)});
            }
        }
        if (has_item_children_) {
            if (has_position_children_ && !order_is_versioned(v)) {
                s.safe = false;  // the i-th key of an OrderedDict changes with move_to_end
            } else if (PyDict_Check(v)) {  // (items are read from dict's storage: see fetch_from)
                s.dict(v);
            } else if (!PyTuple_CheckExact(v)) {
                s.safe = false;  // a list (or anything else) changes without a version
            }
        }
    }

    bool is_attr() const { return access_ == Access::Attr || access_ == Access::GenericAttr; }

    // Whose identity an ID_MATCH pins and who has a subtree to skip.
    bool pinned() const { return pins_identity_ && !children_.empty(); }

    int export_index() const { return export_index_; }
    void set_export_index(int index) { export_index_ = index; }
    int identity_slot() const { return identity_slot_; }
    void set_identity_slot(int slot) { identity_slot_ = slot; }

    // For study: every pinned node below (and at) this one, with what its snapshot holds.
    void collect_snapshots(py::list &out) const {
        if (pinned()) {
            size_t classes = 0, dicts = 0;
            py::list anchors;
            for (const Tag &t : snapshot_.tags) {
                if (t.anchor != nullptr) {
                    anchors.append(t.anchor->source());
                }
                classes += t.own_version;
                dicts += t.dict != nullptr;
            }
            const char *state = snapshot_valid_ ? "valid" : never_safe_ ? "never safe" : "none";
            out.append(py::make_tuple(source_, state, snapshot_.tags.size(), anchors, classes, dicts));
        }
        for (const auto &c : children_) {
            c->collect_snapshots(out);
        }
    }

    // The text of the first failing check below this node (nullptr if everything passes).
    const std::string *first_failure_value(PyObject *v) const {
        for (const auto &leaf : leaves_) {
            if (!leaf->check(v)) {
                PyErr_Clear();
                return &leaf->text();
            }
        }
        for (const auto &c : children_) {
            PyObject *cv = c->fetch_from(v);
            if (cv == nullptr) {
                PyErr_Clear();
                return c->unreadable_text();
            }
            const std::string *t = c->first_failure_value(cv);
            Py_DECREF(cv);
            if (t != nullptr) {
                return t;
            }
        }
        return nullptr;
    }

    // When this node's value cannot be fetched, every check below it fails: report the first.
    const std::string *unreadable_text() {
        const std::string *t = first_text();
        if (t == nullptr) {
            unreadable_ = source_ + " cannot be read";
            return &unreadable_;
        }
        return t;
    }

    const std::string *first_text() const {
        if (!leaves_.empty()) {
            return &leaves_.front()->text();
        }
        for (const auto &c : children_) {
            if (const std::string *t = c->first_text()) {
                return t;
            }
        }
        return nullptr;
    }

    void collect_texts(std::vector<std::string> &out) const {
        for (const auto &leaf : leaves_) {
            out.push_back(leaf->text());
        }
        for (const auto &c : children_) {
            c->collect_texts(out);
        }
    }

    std::vector<std::string> texts() const {
        std::vector<std::string> out;
        collect_texts(out);
        return out;
    }

    bool same_key(Access access, const py::object &key, Py_ssize_t index) const {
        if (access != access_ || index != index_) {
            return false;
        }
        if (key_.ptr() == key.ptr()) {
            return true;
        }
        if (!key_ || !key || Py_TYPE(key_.ptr()) != Py_TYPE(key.ptr())) {
            return false;
        }
        int eq = PyObject_RichCompareBool(key_.ptr(), key.ptr(), Py_EQ);
        if (eq < 0) {
            throw py::error_already_set();
        }
        return eq == 1;
    }

    static GuardManager *find_or_add(std::vector<std::unique_ptr<GuardManager>> &nodes,
                                     Access access, const py::object &key, Py_ssize_t index,
                                     std::string source) {
        for (const auto &n : nodes) {
            if (n->same_key(access, key, index)) {
                return n.get();
            }
        }
        nodes.push_back(std::make_unique<GuardManager>(access, key, index, std::move(source)));
        return nodes.back().get();
    }

private:
    void check_index(Py_ssize_t index) const {
        if (index < 0) {
            throw py::value_error("dict_key/dict_value: the index must be >= 0");
        }
    }
    std::string key_text(Py_ssize_t index) const {
        return "list(" + source_ + ".keys())[" + std::to_string(index) + "]";
    }

    // DictKey/DictValue: the entry at index_ in `parent`'s iteration order (new reference, or
    // NULL). Walking to it costs index_ steps, so an exact dict's entry is remembered with the
    // dict's version: a dict keeps its version (a new one, from one global counter, on every
    // change and for every new dict) exactly while its contents are unchanged, so an unchanged
    // (address, version) pair holds the same borrowed key and value. An OrderedDict is walked
    // every time (move_to_end reorders it without a new version).
    PyObject *fetch_entry(PyObject *parent) const {
        if (!PyDict_Check(parent)) {
            PyErr_SetString(PyExc_TypeError, "dict_key/dict_value: not a dict");
            return nullptr;
        }
        bool cacheable = PyDict_CheckExact(parent);
        if (cacheable && parent == entry_dict_ && pf_dict_version(parent) == entry_version_) {
            return Py_NewRef(access_ == Access::DictKey ? entry_key_ : entry_value_);
        }
        DictKeyWalker walk(parent);
        PyObject *key = nullptr;
        for (Py_ssize_t i = 0; i <= index_; i++) {
            key = walk.next();
            if (key == nullptr) {
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_IndexError, "dict_key/dict_value: the dict has fewer keys");
                }
                return nullptr;
            }
        }
        PyObject *value = PyDict_GetItemWithError(parent, key);  // (identity keys: no __eq__ runs)
        if (value == nullptr) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_KeyError, "dict_key/dict_value: the key vanished");
            }
            return nullptr;
        }
        if (cacheable) {
            entry_dict_ = parent;
            entry_version_ = pf_dict_version(parent);
            entry_key_ = key;      // borrowed: the unchanged dict holds them
            entry_value_ = value;
        }
        return Py_NewRef(access_ == Access::DictKey ? key : value);
    }

    PyObject *lookup(PyObject *mapping) const {
        if (mapping == nullptr || mapping == Py_None) {
            return nullptr;
        }
        if (PyDict_Check(mapping)) {
            PyObject *v = PyDict_GetItemWithError(mapping, key_.ptr());
            Py_XINCREF(v);
            return v;
        }
        return PyObject_GetItem(mapping, key_.ptr());
    }

    GuardManager *child(Access access, const py::object &key, Py_ssize_t index,
                        std::string source) {
        has_attr_children_ = has_attr_children_ || access == Access::Attr || access == Access::GenericAttr;
        // (an iterator moves on without a version: a snapshot of its parent is never safe)
        has_item_children_ = has_item_children_ || access == Access::Item ||
                             access == Access::DictKey || access == Access::DictValue ||
                             access == Access::TupleIterRest;
        has_position_children_ = has_position_children_ || access == Access::DictKey ||
                                 access == Access::DictValue;
        snapshot_valid_ = false;
        never_safe_ = false;
        return find_or_add(children_, access, key, index, std::move(source));
    }

    void add(LeafPtr leaf) {
        pins_identity_ = pins_identity_ || leaf->kind() == LeafKind::Identity;
        leaves_.push_back(std::move(leaf));
    }

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
    bool has_attr_children_ = false;
    bool has_item_children_ = false;
    bool has_position_children_ = false;
    // Recorded by check_value (a cache of facts, not part of the tree's meaning).
    mutable Snapshot snapshot_;
    mutable bool snapshot_valid_ = false;
    // The last full check passed but read facts no snapshot covers (a list's items, a value
    // compared by == that can change in place...): later checks do not record one again.
    mutable bool never_safe_ = false;
};

PyObject *pf_fetch_child(const GuardManager *child, PyObject *parent) {
    return child->fetch_from(parent);
}

class RootGuardManager {
public:
    explicit RootGuardManager(bool skip_unchanged = true) : skip_unchanged_(skip_unchanged) {}
    RootGuardManager(const RootGuardManager &) = delete;
    RootGuardManager &operator=(const RootGuardManager &) = delete;

    GuardManager *local(const py::str &name, Py_ssize_t index) {
        if (index < 0) {
            throw py::value_error("local: the slot index must be >= 0");
        }
        return GuardManager::find_or_add(roots_, Access::Local, name, index,
                                         "L[" + repr_of(name) + "]");
    }
    GuardManager *global_(const py::str &name) {
        return GuardManager::find_or_add(roots_, Access::Global, name, 0,
                                         "G[" + repr_of(name) + "]");
    }
    GuardManager *globals_dict() {
        return GuardManager::find_or_add(roots_, Access::GlobalsDict, py::none(), 0, "G");
    }
    GuardManager *builtin(const py::str &name) {
        return GuardManager::find_or_add(roots_, Access::Builtin, name, 0,
                                         "B[" + repr_of(name) + "]");
    }
    GuardManager *closure(Py_ssize_t index) {
        if (index < 0) {
            throw py::value_error("closure: the cell index must be >= 0");
        }
        return GuardManager::find_or_add(roots_, Access::Closure, py::none(), index,
                                         "C[" + std::to_string(index) + "].cell_contents");
    }
    void add_call_match(py::object fn, py::object expected, std::string text) {
        if (text.empty()) {
            std::string name = py::hasattr(fn, "__qualname__")
                                   ? py::str(fn.attr("__qualname__")).cast<std::string>()
                                   : repr_of(fn);
            text = name + "() == " + repr_of(expected);
        }
        leaves_.push_back(make_call_match(std::move(fn), std::move(expected), std::move(text)));
    }
    void add_torch_state_match(const std::string &state, py::object expected, std::string text) {
        if (text.empty()) {
            text = state + " == " + repr_of(expected);
        }
        leaves_.push_back(make_torch_state_match(state, std::move(expected), std::move(text)));
    }

    // Mark `node` (a node of this tree) as exported; returns its index in the exports tuple.
    int export_node(GuardManager *node) {
        if (node->export_index() < 0) {
            node->set_export_index(n_exports_++);
        }
        return node->export_index();
    }
    int export_count() const { return n_exports_; }

    // aliasing(nodes...) == classes (AliasingMatch): the nodes' values are one object where the
    // classes are equal, distinct objects elsewhere. Checked after the whole tree passed.
    void add_aliasing_match(const std::vector<GuardManager *> &nodes, std::vector<int> classes,
                            std::string text, std::vector<int> storage_classes) {
        if (nodes.size() != classes.size() ||
            (!storage_classes.empty() && storage_classes.size() != classes.size())) {
            throw py::value_error("add_aliasing_match: one class (and storage class) per node");
        }
        AliasingMatch match{{}, AliasingMatch::number_by_first_appearance(classes), std::move(text)};
        match.storage_classes = AliasingMatch::number_by_first_appearance(storage_classes);
        for (const auto *numbers : {&match.classes, &match.storage_classes}) {
            int count = numbers->empty() ? 0 : *std::max_element(numbers->begin(), numbers->end()) + 1;
            (numbers == &match.classes ? match.n_classes : match.n_storage_classes) = count;
        }
        for (GuardManager *node : nodes) {
            if (node->identity_slot() < 0) {
                node->set_identity_slot(n_identities_++);
            }
            match.slots.push_back(node->identity_slot());
        }
        if (match.text.empty()) {
            match.text = "aliasing(...) of " + std::to_string(nodes.size()) + " values";
        }
        aliasing_.push_back(std::move(match));
    }

    // The hot path. Never leaves an exception set. With `exports` (and something exported), a
    // pass also sets *exports to the tuple of exported values (new reference).
    bool check_frame(const FrameView &fv, PyObject **exports = nullptr) const {
        if (exports == nullptr || n_exports_ == 0) {
            return finish(run(fv, Run{skip_unchanged_, nullptr}));
        }
        *exports = nullptr;
        std::vector<PyObject *> reentrant;  // only if guard code re-entered this very tree
        std::vector<PyObject *> &values = scratch_busy_ ? reentrant : scratch_;
        bool outermost = !scratch_busy_;
        scratch_busy_ = true;
        values.assign(n_exports_, nullptr);
        bool ok = run(fv, Run{skip_unchanged_, &values});
        if (ok) {
            *exports = PyTuple_New(n_exports_);
            ok = *exports != nullptr;
        }
        for (int i = 0; i < n_exports_; i++) {
            if (ok && values[i] != nullptr) {
                PyTuple_SET_ITEM(*exports, i, values[i]);  // steals
            } else {
                ok = false;  // (a pass fetches every exported node: never taken)
                Py_XDECREF(values[i]);
            }
            values[i] = nullptr;
        }
        if (!ok) {
            Py_CLEAR(*exports);
        }
        scratch_busy_ = scratch_busy_ && !outermost;
        return finish(ok);
    }

    const std::string *first_failure(const FrameView &fv) {
        const std::string *failed = first_failure_of_tree(fv);
        if (failed != nullptr || aliasing_.empty()) {
            return failed;
        }
        std::vector<PyObject *> identities(n_identities_, nullptr);  // every check passed: read them
        Run how{false, nullptr, &identities};
        bool tree_ok = run_tree(fv, how);
        for (const auto &match : aliasing_) {
            if (failed == nullptr && (!tree_ok || !match.check(identities))) {
                failed = &match.text;
            }
        }
        release(identities);
        PyErr_Clear();
        return failed;
    }

    const std::string *first_failure_of_tree(const FrameView &fv) {
        for (const auto &leaf : leaves_) {
            if (!leaf->check(nullptr)) {
                PyErr_Clear();
                return &leaf->text();
            }
        }
        for (const auto &n : roots_) {
            PyObject *v = n->fetch_root(fv);
            if (v == nullptr) {
                PyErr_Clear();
                return n->unreadable_text();
            }
            const std::string *t = n->first_failure_value(v);
            Py_DECREF(v);
            if (t != nullptr) {
                return t;
            }
        }
        return nullptr;
    }

    py::list snapshots() const {
        py::list out;
        for (const auto &n : roots_) {
            n->collect_snapshots(out);
        }
        return out;
    }

    std::vector<std::string> texts() const {
        std::vector<std::string> out;
        for (const auto &leaf : leaves_) {
            out.push_back(leaf->text());
        }
        for (const auto &n : roots_) {
            n->collect_texts(out);
        }
        for (const auto &match : aliasing_) {
            out.push_back(match.text);
        }
        return out;
    }

private:
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

    // The tree, then the aliasing checks on the values it read.
    bool run(const FrameView &fv, const Run &how) const {
        if (aliasing_.empty()) {
            return run_tree(fv, how);
        }
        // The identities vector is kept between calls (no allocation on the hot path); a check
        // re-entered while it runs (a guard's attribute read running compiled code) gets its own.
        std::vector<PyObject *> reentrant;
        std::vector<PyObject *> &identities = identities_busy_ ? reentrant : identities_;
        bool outermost = !identities_busy_;
        identities_busy_ = true;
        identities.assign(n_identities_, nullptr);
        Run with_identities = how;
        with_identities.identities = &identities;
        bool ok = run_tree(fv, with_identities);
        for (size_t i = 0; ok && i < aliasing_.size(); i++) {
            ok = aliasing_[i].check(identities);
        }
        release(identities);
        identities_busy_ = identities_busy_ && !outermost;
        return ok;
    }

    bool run_tree(const FrameView &fv, const Run &how) const {
        for (const auto &leaf : leaves_) {
            if (!leaf->check(nullptr)) {
                return false;
            }
        }
        for (const auto &n : roots_) {
            PyObject *v = n->fetch_root(fv);
            if (v == nullptr) {
                return false;
            }
            bool ok = n->check_value(v, how, nullptr);
            Py_DECREF(v);
            if (!ok) {
                return false;
            }
        }
        return true;
    }

    bool skip_unchanged_;
    int n_exports_ = 0;
    int n_identities_ = 0;
    std::vector<AliasingMatch> aliasing_;
    mutable std::vector<PyObject *> scratch_;  // the exports of the running check
    mutable bool scratch_busy_ = false;
    mutable std::vector<PyObject *> identities_;  // the identity slots of the running check
    mutable bool identities_busy_ = false;
    std::vector<LeafPtr> leaves_;  // call matches (global state)
    std::vector<std::unique_ptr<GuardManager>> roots_;
};

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

}  // namespace

void bind_guards(py::module_ &m) {
    m.def("tuple_iterator_rest", [](py::handle it) {
              PyObject *rest = pf_tuple_iterator_rest(it.ptr());
              if (rest == nullptr) {
                  throw py::error_already_set();
              }
              return py::reinterpret_steal<py::tuple>(rest);
          }, py::arg("it"),
          "the items a tuple iterator has still to give, as a tuple (what its guards read)");
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
        .def("add_type_match", &GuardManager::add_type_match, py::arg("tp"), py::arg("text") = "")
        .def("add_id_match", &GuardManager::add_id_match, py::arg("obj"), py::arg("text") = "")
        .def("add_equals_match", &GuardManager::add_equals_match, py::arg("value"),
             py::arg("text") = "")
        .def("add_none_match", &GuardManager::add_none_match, py::arg("text") = "")
        .def("add_not_none_match", &GuardManager::add_not_none_match, py::arg("text") = "")
        .def("add_len_match", &GuardManager::add_len_match, py::arg("n"), py::arg("text") = "")
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
             "autocast_cpu, autocast_cuda) is `expected` (autocast: None when off, else its dtype)")
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
        .def("export", &RootGuardManager::export_node, py::arg("node"),
             "hand `node`'s value to the frame on every pass (the hook stores the exports "
             "tuple in the local " PF_EXPORTS_LOCAL "); returns its index in that tuple")
        .def_property_readonly("export_count", &RootGuardManager::export_count)
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
             "(source, state, facts, anchors (their sources), class versions, dict versions) of every node whose "
             "identity is pinned: what lets it skip its subtree while nothing changed")
        .def("__len__", [](const RootGuardManager &r) { return r.texts().size(); });
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

extern "C" int pf_guards_check_frame(void *root, PyObject *const *fast, int nfast,
                                     PyObject *globals, PyObject *builtins, PyObject *closure,
                                     PyObject **exports) {
    pyframe::FrameView fv;
    fv.fast = fast;
    fv.nfast = nfast;
    fv.globals = globals;
    fv.builtins = builtins;
    fv.closure = closure;
    try {
        return static_cast<pyframe::RootGuardManager *>(root)->check_frame(fv, exports) ? 1 : 0;
    } catch (...) {
        PyErr_Clear();
        return 0;
    }
}
