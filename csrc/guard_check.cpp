// guard_check.cpp - checking a guard tree: the hot path of every cached call (guard_tree.h).
//
// The hook (cache.cpp) calls pf_guards_check_frame with the frame's localsplus; the tree fetches
// each node's value once, runs its leaves, then its children, and skips the subtree of a pinned
// node while its snapshot (guard_snapshot.h) holds. Recording a snapshot (guard_snapshot.cpp)
// happens on the first full pass only.
#include "guard_tree.h"

namespace pyframe {

// ---- fetching ---------------------------------------------------------------------------------

// The value of a root node (Local/Global/Builtin/Closure) in `fv`: new reference, or NULL
// when it is absent (an error may be set).
PyObject *GuardManager::fetch_root(const FrameView &fv) const {
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
PyObject *GuardManager::fetch_from(PyObject *parent) const {
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
    if (access_ == Access::WeakRefCall) {
        return pf_weakref_referent(parent);
    }
    if (access_ == Access::TensorSize || access_ == Access::TensorStride ||
        access_ == Access::TensorStorageOffset) {
        return read_tensor_property(parent, static_cast<int>(access_) - static_cast<int>(Access::TensorSize), index_);
    }
    if (PyDict_Check(parent)) {  // exact lookup: no __getitem__/__missing__ call
        PyObject *v = PyDict_GetItemWithError(parent, key_.ptr());
        Py_XINCREF(v);
        return v;
    }
    return PyObject_GetItem(parent, key_.ptr());
}

// DictKey/DictValue: the entry at index_ in `parent`'s iteration order (new reference, or
// NULL). Walking to it costs index_ steps, so an exact dict's entry is remembered with the
// dict's version: a dict keeps its version (a new one, from one global counter, on every
// change and for every new dict) exactly while its contents are unchanged, so an unchanged
// (address, version) pair holds the same borrowed key and value. An OrderedDict is walked
// every time (move_to_end reorders it without a new version).
PyObject *GuardManager::fetch_entry(PyObject *parent) const {
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

PyObject *GuardManager::lookup(PyObject *mapping) const {
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

PyObject *pf_fetch_child(const GuardManager *child, PyObject *parent) {
    return child->fetch_from(parent);
}

// ---- checking ---------------------------------------------------------------------------------

// Leaves first (in the order added), then children. false on the first failure.
// `skip`: a pinned node may skip its children while its snapshot holds. `record`: the
// snapshot of an enclosing pinned node being recorded (its facts about this subtree go there).
bool GuardManager::check_value(PyObject *v, const Run &run, Snapshot *record) const {
    // A pinned node checks its identity first; its other leaves (a method's class lookup, a
    // hook table's length...) read only what its snapshot records, so while the snapshot
    // holds they pass as they did and are skipped with the subtree.
    const bool may_skip = run.skip_unchanged && pinned();
    for (const auto &leaf : leaves_) {
        if (may_skip && leaf->kind() != LeafKind::Identity && leaf->kind() != LeafKind::Type) {
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
    return check_pinned_subtree(v, run, record);
}

// A pinned node whose identity passed: its subtree skipped while the snapshot holds (the values
// it exported handed over from the snapshot), else its other leaves and its subtree checked in
// full, recording a snapshot where the facts allow one.
bool GuardManager::check_pinned_subtree(PyObject *v, const Run &run, Snapshot *record) const {
    if (snapshot_valid_ && snapshot_.is_of(v) && snapshot_.holds()) {
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
        if (leaf->kind() != LeafKind::Identity && leaf->kind() != LeafKind::Type && !leaf->check(v)) {
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
    if (!pins_identity_ && !mine.name_object(v)) {  // (type-pinned: which object it is for)
        never_safe_ = true;
        if (record != nullptr) {
            record->safe = false;
        }
        return check_children(v, run, nullptr);
    }
    record_facts(v, mine);
    bool ok = check_children(v, run, &mine);
    snapshot_valid_ = ok && mine.safe;
    never_safe_ = ok && !mine.safe;
    if (snapshot_valid_) {
        // (before handing it up, as a skipped check hands up the kept snapshot: every enclosing
        // snapshot copies these facts and drops the same repeats again, from fewer of them)
        mine.drop_repeats();
        mine.seal();
    }
    if (record != nullptr) {
        record->append(mine);
    }
    if (snapshot_valid_) {
        snapshot_ = std::move(mine);
    }
    return ok;
}

bool GuardManager::check_children(PyObject *v, const Run &run, Snapshot *record) const {
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

// The hot path. Never leaves an exception set. With `exports` (and something exported), a
// pass also sets *exports to the tuple of exported values (new reference).
bool RootGuardManager::check_frame(const FrameView &fv, PyObject **exports) const {
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
    // (exports, or with grouped_: ((exports[:grouped_]), exports[grouped_:]...))
    PyObject *group = nullptr;
    if (ok) {
        *exports = PyTuple_New(grouped_ ? 1 + n_exports_ - grouped_ : n_exports_);
        group = grouped_ && *exports != nullptr ? PyTuple_New(grouped_) : nullptr;
        ok = *exports != nullptr && (group != nullptr || !grouped_);
        if (group != nullptr) {
            PyTuple_SET_ITEM(*exports, 0, group);
        }
    }
    for (int i = 0; i < n_exports_; i++) {
        if (ok && values[i] != nullptr) {  // (steals)
            if (i < grouped_) {
                PyTuple_SET_ITEM(group, i, values[i]);
            } else {
                PyTuple_SET_ITEM(*exports, grouped_ ? 1 + i - grouped_ : i, values[i]);
            }
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

// The tree, then the aliasing and shape checks on the values it read.
bool RootGuardManager::run(const FrameView &fv, const Run &how) const {
    if (aliasing_.empty() && shapes_.empty()) {
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
    for (size_t i = 0; ok && i < shapes_.size(); i++) {
        ok = shapes_[i].check(identities);
    }
    release(identities);
    identities_busy_ = identities_busy_ && !outermost;
    return ok;
}

bool RootGuardManager::run_tree(const FrameView &fv, const Run &how) const {
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

}  // namespace pyframe

// ---- the C interface (pyframe.h) ----------------------------------------------------------------

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
