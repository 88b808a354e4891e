// guard_snapshot.cpp - recording the facts of an unchanged-subtree snapshot (guard_snapshot.h,
// docs/c_layer.md "Unchanged subtrees"): on a pinned node's first full pass, what each fetch and
// each leaf below it relied on, and whether those facts are enough (a "safe" snapshot).
#include "guard_tree.h"

namespace pyframe {

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

// Where v's instance dict is, if a TypeAndDict fact can cover it (an exact dict, and v's type with
// a version tag): what record_facts records and what record_attr relies on for an attribute found
// in that dict. NULL if not.
PyObject **versioned_instance_dict_slot(PyObject *v) {
    PyObject **slot = pf_instance_dict_slot(v);
    if (slot == nullptr || *slot == nullptr || !PyDict_CheckExact(*slot) ||
        !pf_type_assign_version_tag(Py_TYPE(v))) {
        return nullptr;
    }
    return slot;
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

namespace {

// An attribute kept in a field of v's struct (a function's `__code__`, a cell's contents, a
// slot): the field still holding the same pointer (and, for a slot, type(v) unchanged).
bool record_field(PyObject *v, PyObject *name, PyObject *value, bool generic, Snapshot &s) {
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
bool record_class_attr(PyObject *v, PyObject *name, PyObject *value, bool generic, Snapshot &s) {
    PyTypeObject *tp = Py_TYPE(v);
    if (PyType_Check(v) || !lookup_is_objects(tp, generic) || _PyType_Lookup(tp, name) != value ||
        Py_TYPE(value)->tp_descr_get != nullptr || !pf_type_assign_version_tag(tp)) {
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
    s.tags.push_back(Tag::of_type_and_dict(v, dict, slot));
    return true;
}

// What an AttrsLenMatch leaf on v relies on: each attribute found in v's instance dict (its
// type and the dict's version, as record_attr records an attribute child's fetch), and each
// attribute's length (its version, as a LenMatch on a dict records it); else no safe snapshot.
void record_lengths(PyObject *v, const std::vector<py::str> &names, Snapshot &s) {
    for (const py::str &name : names) {
        PyObject *attr = PyObject_GetAttr(v, name.ptr());
        if (attr == nullptr) {
            PyErr_Clear();
            s.safe = false;
            return;
        }
        PyObject **slot = attr_is_from_instance_dict(v, name.ptr(), attr, false) ? versioned_instance_dict_slot(v)
                                                                                  : nullptr;
        if (slot == nullptr) {
            s.safe = false;
        } else {
            s.tags.push_back(Tag::of_type_and_dict(v, *slot, slot));  // (once: drop_repeats)
        }
        if (is_versioned_dict(attr)) {
            s.dict(attr, /*leaf=*/true);  // (borrowed: v's instance dict holds it while the fact above holds)
        } else if (!is_immutable(attr)) {
            s.safe = false;
        }
        Py_DECREF(attr);
    }
}

}  // namespace

// What tells a later check that `child`'s fetch from v still gives `value` (v being the same
// object): the instance dict's version (recorded with v's facts), a member fixed for v's life,
// a type's versions, or else an anchor (fetched again and compared by identity).
void GuardManager::record_attr(PyObject *v, const GuardManager &child, PyObject *value, Snapshot &s) {
    PyObject *name = child.key_.ptr();
    if (attr_is_fixed(v, name)) {
        return;
    }
    if (attr_is_from_instance_dict(v, name, value, child.generic_)) {
        if (PyObject **slot = versioned_instance_dict_slot(v)) {
            s.tags.push_back(Tag::of_type_and_dict(v, *slot, slot));  // (once: drop_repeats)
            return;
        }
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

// What the checks of this node (its leaves, and the fetches of its children) rely on.
void GuardManager::record_facts(PyObject *v, Snapshot &s) const {
    bool reads_attrs = false;  // a leaf depends on v's attributes (an attribute child records
                               // what its own fetch relies on: record_attr)
    for (const auto &leaf : leaves_) {
        switch (leaf->kind()) {
            case LeafKind::Value:
                if (is_versioned_dict(v)) {
                    s.dict(v, /*leaf=*/true);
                } else if (!is_immutable(v)) {
                    s.safe = false;
                }
                break;
            case LeafKind::Keys:  // (in order: an OrderedDict reorders without a new version)
                if (order_is_versioned(v)) {
                    s.dict(v, /*leaf=*/true);
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
            case LeafKind::Lengths:
                record_lengths(v, leaf->attrs(), s);
                break;
            case LeafKind::Identity:
            case LeafKind::Tensor:
                break;
        }
    }
    // (An attribute child records what its fetch relies on itself: record_attr.)
    if (reads_attrs && PyType_Check(v) && s.try_type_of(v) && s.try_class_version(v)) {
        // A class: what lookups on it find changes only with its version tag (type's setattr
        // modifies the type, and its subclasses), which covers its own dict too.
    } else if (reads_attrs) {
        PyObject **slot = versioned_instance_dict_slot(v);
        if (slot == nullptr) {
            s.safe = false;
        } else {
            s.tags.push_back(Tag::of_type_and_dict(v, *slot, slot));
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

// For study: every pinned node below (and at) this one, with what its snapshot holds: its state,
// its number of facts, the sources of its anchors, and how many facts of each kind (a leaf
// dict: one nothing else is read through, checked after the others).
void GuardManager::collect_snapshots(py::list &out) const {
    if (pinned()) {
        static const char *kind_names[] = {"dict", "type_and_dict", "type", "class_version", "field", "anchor"};
        py::list anchors;
        py::dict kinds;
        for (const Tag &t : snapshot_.tags) {
            if (t.kind == Tag::Kind::Anchor) {
                anchors.append(t.anchor->source());
            }
            py::str name(t.kind == Tag::Kind::Dict && t.leaf ? "leaf_dict" : kind_names[static_cast<int>(t.kind)]);
            kinds[name] = (kinds.contains(name) ? kinds[name].cast<int>() : 0) + 1;
        }
        const char *state = snapshot_valid_ ? "valid" : never_safe_ ? "never safe" : "none";
        out.append(py::make_tuple(source_, state, snapshot_.tags.size(), anchors, kinds));
    }
    for (const auto &c : children_) {
        c->collect_snapshots(out);
    }
}

}  // namespace pyframe
