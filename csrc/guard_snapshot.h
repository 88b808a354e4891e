// guard_snapshot.h - the facts that let a pinned node skip its subtree while nothing it read
// changed (docs/c_layer.md, "Unchanged subtrees"). Checking a snapshot is on the hot path
// (inline here); recording one is not (guard_snapshot.cpp).
#ifndef PYFRAME_GUARD_SNAPSHOT_H
#define PYFRAME_GUARD_SNAPSHOT_H

#include "guards.h"

#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

namespace pyframe {

class GuardManager;
// `child`'s value fetched from `parent` (guard_check.cpp): new reference or NULL.
PyObject *pf_fetch_child(const GuardManager *child, PyObject *parent);

// ---- unchanged subtrees ------------------------------------------------------------------------
//
// A node whose value is pinned by an ID_MATCH, or by a TYPE_MATCH of a weakly referenceable kind
// (an nn.Module; the snapshot then names its object by a weak reference and holds only for it),
// may skip its whole subtree on later checks while nothing the subtree read has changed. The
// first check that runs the subtree in full and passes also records a Snapshot: for every object
// whose attributes it read, the object's
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

// One fact of a snapshot, of one of six kinds; `holds()` is a switch on the kind, each case a few
// loads and compares (a snapshot of a library model has hundreds: one per module's dicts, most
// of them dict versions). 64 bytes, one cache line.
struct Tag {
    enum class Kind : uint8_t {
        Dict,         // the dict `dict` still has version `version`
        TypeAndDict,  // obj's type is `type` with `type_version`, and obj keeps `dict` (at `slot`)
                      // with version `version`: every attribute found through both is unchanged
        Type,         // obj's type is `type` with `type_version` (its `__class__` unchanged)
        ClassVersion, // the class obj's own version tag is still `type_version`
        Field,        // the field `slot` of obj's struct still holds `dict` (pf_attr_field)
        Anchor,       // `anchor` fetched from `anchor_parent` is still obj (kept alive)
    };

    Kind kind;
    bool leaf = false;                // Dict: no later fact reads what the dict holds
    unsigned int type_version = 0;
    PyObject *obj;                    // borrowed (see above); for an anchor, the value it fetched
    PyTypeObject *type = nullptr;
    PyObject *dict = nullptr;         // Dict, TypeAndDict: the dict; Field: the value held
    PyObject **slot = nullptr;        // TypeAndDict: where obj keeps its dict; Field: the field
    unsigned long long version = 0;   // Dict, TypeAndDict: the dict's version
    const GuardManager *anchor = nullptr;
    PyObject *anchor_parent = nullptr;

    static Tag of_dict(PyObject *d) {
        Tag t{Kind::Dict, false, 0, d};
        t.dict = d;
        t.version = pf_dict_version(d);
        return t;
    }
    static Tag of_type_and_dict(PyObject *obj, PyObject *dict, PyObject **slot) {
        Tag t = of_type(obj);
        t.kind = Kind::TypeAndDict;
        t.dict = dict;
        t.slot = slot;
        t.version = pf_dict_version(dict);
        return t;
    }
    static Tag of_type(PyObject *obj) {
        PyTypeObject *tp = Py_TYPE(obj);
        Tag t{Kind::Type, false, tp->tp_version_tag, obj};
        t.type = tp;
        return t;
    }
    static Tag class_version(PyTypeObject *cls) { return Tag{Kind::ClassVersion, false, cls->tp_version_tag, (PyObject *)cls}; }
    static Tag in_field(PyObject *obj, PyObject **field) {
        Tag t{Kind::Field, false, 0, obj};
        t.slot = field;
        t.dict = *field;
        return t;
    }
    static Tag anchored(const GuardManager *child, PyObject *parent, PyObject *value) {
        Tag t{Kind::Anchor, false, 0, value};
        t.anchor = child;
        t.anchor_parent = parent;
        return t;
    }

    bool holds() const {
        switch (kind) {
            case Kind::Dict:
                return pf_dict_version(dict) == version;
            case Kind::TypeAndDict:  // (a new __dict__ assigned: the slot holds another dict)
                return Py_TYPE(obj) == type && type->tp_version_tag == type_version && *slot == dict &&
                       pf_dict_version(dict) == version;
            case Kind::Type:
                return Py_TYPE(obj) == type && type->tp_version_tag == type_version;
            case Kind::ClassVersion:
                return ((PyTypeObject *)obj)->tp_version_tag == type_version;
            case Kind::Field:
                return *slot == dict;
            case Kind::Anchor: {
                PyObject *now = pf_fetch_child(anchor, anchor_parent);
                if (now == nullptr) {
                    PyErr_Clear();
                    return false;
                }
                Py_DECREF(now);
                return now == obj;
            }
        }
        return false;
    }
};
static_assert(sizeof(Tag) == 64, "a fact fills one cache line");

// A dict still at a version, of a dict nothing else is read through: the most common fact (an
// nn.Module's hook tables), kept apart in 16 bytes when checked, so that a large snapshot touches
// far less memory than as 64-byte Tags, and checked in one tight loop after the other facts
// (whose parents came first in order; these dicts' holders are among them).
struct DictFact {
    PyObject *dict;
    unsigned long long version;
};

// drop_repeats' tables: at most `n` keys inserted, never erased, so one array of at least 2n
// slots (open addressing, probed in turn) holds them with no allocation per key.
template <typename K, typename V, typename Hash>
class FlatMap {
public:
    explicit FlatMap(size_t n) {
        size_t capacity = 16;
        while (capacity < 2 * n) {
            capacity <<= 1;
        }
        slots_.resize(capacity);
        mask_ = capacity - 1;
    }
    const V *find(const K &key) const {
        for (size_t i = Hash{}(key) & mask_;; i = (i + 1) & mask_) {
            const Slot &s = slots_[i];
            if (!s.used) {
                return nullptr;
            }
            if (s.key == key) {
                return &s.value;
            }
        }
    }
    // As std::unordered_map::emplace: a key there already keeps its value (false).
    bool emplace(const K &key, V value) {
        for (size_t i = Hash{}(key) & mask_;; i = (i + 1) & mask_) {
            Slot &s = slots_[i];
            if (!s.used) {
                s = Slot{true, key, value};
                return true;
            }
            if (s.key == key) {
                return false;
            }
        }
    }

private:
    struct Slot {
        bool used = false;
        K key{};
        V value{};
    };
    std::vector<Slot> slots_;
    size_t mask_ = 0;
};

inline size_t mix_pointer(size_t h, const void *p) {
    return (h ^ reinterpret_cast<uintptr_t>(p)) * 0x9E3779B97F4A7C15ull;
}

struct PointerHash {
    size_t operator()(const void *p) const {
        size_t h = mix_pointer(0, p);
        return h ^ (h >> 29);
    }
};

// What makes two facts equal (drop_repeats keeps the first).
using FactKey = std::tuple<Tag::Kind, PyObject *, PyTypeObject *, PyObject *, PyObject **, const GuardManager *>;

struct FactKeyHash {
    size_t operator()(const FactKey &k) const {
        size_t h = static_cast<size_t>(std::get<0>(k));
        h = mix_pointer(h, std::get<1>(k));
        h = mix_pointer(h, std::get<2>(k));
        h = mix_pointer(h, std::get<3>(k));
        h = mix_pointer(h, std::get<4>(k));
        h = mix_pointer(h, std::get<5>(k));
        return h ^ (h >> 29);
    }
};

struct Snapshot {
    std::vector<Tag> tags;  // as recorded, parent first
    std::vector<std::pair<int, PyObject *>> exports;  // (export index, borrowed value) below
    std::vector<std::pair<int, PyObject *>> identities;  // (identity slot, borrowed value) below
    std::vector<py::object> anchored;  // the values anchors fetched, kept alive (no reuse of an id)
    bool safe = true;
    // A type-pinned node's snapshot: a weak reference to the object it was recorded for (no
    // other object at its address can pass for it); empty for an identity-pinned node.
    py::object object_ref;

    // The checked form (seal()): every fact but the leaf dicts' in order, then those.
    std::vector<Tag> ordered_facts;
    std::vector<DictFact> leaf_dicts;

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

    // Keep the first of equal facts (a class, a module's globals... met on many paths), and drop
    // a fact an earlier one implies: an object's type after its type-and-dict, a dict's version
    // after a type-and-dict holding that dict at that version. A dict met as a leaf and as a
    // parent is a parent. A type-and-dict whose object's type came earlier takes that fact's
    // place: it reads the same object, alive there, and its dict only while the object still
    // holds it. Order stays parent first (each kept fact's parents came before it), so every fact
    // reads objects alive under the facts before it.
    void drop_repeats() {
        FlatMap<FactKey, char, FactKeyHash> seen(tags.size());
        FlatMap<PyObject *, size_t, PointerHash> type_fact(tags.size());  // obj -> index in `kept` of its Type/TypeAndDict
        FlatMap<PyObject *, unsigned long long, PointerHash> versioned(tags.size());  // dict -> version a kept fact checks
        FlatMap<PyObject *, size_t, PointerHash> dict_fact(tags.size());  // dict -> index in `kept` of its Dict fact
        std::vector<Tag> kept;
        kept.reserve(tags.size());
        for (const Tag &t : tags) {
            if (t.kind == Tag::Kind::Dict) {
                const unsigned long long *v = versioned.find(t.dict);
                if (v != nullptr && *v == t.version) {
                    const size_t *d = dict_fact.find(t.dict);
                    if (d != nullptr && !t.leaf) {
                        kept[*d].leaf = false;  // a parent: checked in order
                    }
                    continue;
                }
                versioned.emplace(t.dict, t.version);
                dict_fact.emplace(t.dict, kept.size());
            } else if (!seen.emplace(FactKey(t.kind, t.obj, t.type, t.dict, t.slot, t.anchor), 0)) {
                continue;
            } else if (t.kind == Tag::Kind::Type || t.kind == Tag::Kind::TypeAndDict) {
                const size_t *earlier = type_fact.find(t.obj);
                if (earlier != nullptr) {
                    Tag &e = kept[*earlier];
                    if (e.type == t.type && e.type_version == t.type_version) {
                        if (t.kind == Tag::Kind::Type) {
                            continue;  // implied by the earlier one
                        }
                        if (e.kind == Tag::Kind::Type) {
                            e = t;  // the type-and-dict takes the type's place
                            versioned.emplace(t.dict, t.version);
                            continue;
                        }
                    }
                } else {
                    type_fact.emplace(t.obj, kept.size());
                }
                if (t.kind == Tag::Kind::TypeAndDict) {
                    versioned.emplace(t.dict, t.version);
                }
            }
            kept.push_back(t);
        }
        tags = std::move(kept);
    }

    // Build the checked form of `tags` (after drop_repeats).
    void seal() {
        ordered_facts.clear();
        leaf_dicts.clear();
        for (const Tag &t : tags) {
            if (t.kind == Tag::Kind::Dict && t.leaf) {
                leaf_dicts.push_back(DictFact{t.dict, t.version});
            } else {
                ordered_facts.push_back(t);
            }
        }
    }

    // Name the object this snapshot is for, by a weak reference; false if it cannot be referenced.
    bool name_object(PyObject *v) {
        PyObject *ref = PyWeakref_NewRef(v, nullptr);
        if (ref == nullptr) {
            PyErr_Clear();
            return false;
        }
        object_ref = py::reinterpret_steal<py::object>(ref);
        return true;
    }
    // Recorded for `v` (always, for an identity-pinned node, whose ID_MATCH has just passed).
    bool is_of(PyObject *v) const {
        return !object_ref || PyWeakref_GET_OBJECT(object_ref.ptr()) == v;
    }

    bool holds() const {
        for (const Tag &t : ordered_facts) {
            if (!t.holds()) {
                return false;
            }
        }
        for (const DictFact &d : leaf_dicts) {
            if (pf_dict_version(d.dict) != d.version) {
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
        if (!pf_type_assign_version_tag(tp)) {
            return false;
        }
        tags.push_back(Tag::of_type(obj));
        return true;
    }
    // The class `cls`'s own version: what a lookup through its MRO finds.
    bool try_class_version(PyObject *cls) {
        if (!pf_type_assign_version_tag((PyTypeObject *)cls)) {
            return false;
        }
        tags.push_back(Tag::class_version((PyTypeObject *)cls));
        return true;
    }
    // `leaf`: nothing else is read through the dict (a leaf checks its value or keys); else a
    // parent whose items are fetched by later facts' nodes.
    void dict(PyObject *d, bool leaf = false) {
        tags.push_back(Tag::of_dict(d));
        tags.back().leaf = leaf;
    }
};

// The rules a recorded fact rests on (guard_snapshot.cpp).
bool is_versioned_dict(PyObject *v);
bool order_is_versioned(PyObject *v);
bool is_immutable(PyObject *v);

}  // namespace pyframe

#endif  // PYFRAME_GUARD_SNAPSHOT_H
