// cache.cpp - the per-code cache (docs/c_layer.md section 3).
//
// Each code object pyframe has seen carries a PfExtraState in its co_extra slot: the code's
// state (active / SKIP / RUN_ONLY) and its entries, most recently hit first. The structs are
// plain C (pyframe.h) because the hook reads them on every call; this file creates, searches and
// frees them, and exposes them to Python (get_cache_entries, get_code_state, clear_code, reset).
//
// Lifetime: an ExtraState is freed with its code object by pf_extra_state_free (the co_extra
// freefunc). Entries are freed by clear_code/reset, or with their ExtraState. Guards may run
// Python code (an __eq__, a property) that clears the very list being searched, so a lookup
// marks the state busy and entries dropped meanwhile are parked in a graveyard, freed later.
#include "pyframe.h"

#include <pybind11/pybind11.h>

#include <cstdlib>

namespace py = pybind11;

// Every live ExtraState, so reset() can reach codes that are not referenced from Python.
static PfExtraState *pf_all_states = nullptr;

static void pf_entry_free(PfEntry *e, bool drop_refs) {
    if (drop_refs) {
        Py_XDECREF(e->code);
        Py_XDECREF(e->guards);
        Py_XDECREF(e->info);
        Py_XDECREF(e->owner);
    }
    std::free(e->slot_map);
    std::free(e);
}

// Frees a detached list. Dropping references may run arbitrary Python code (finalizers), which
// is why lists are always detached from their state first.
static void pf_entries_free(PfEntry *list, bool drop_refs) {
    while (list != nullptr) {
        PfEntry *next = list->next;
        pf_entry_free(list, drop_refs);
        list = next;
    }
}

// What a list detached from `s` becomes: when no lookup is running, the list to free now (with
// the graveyard); during a lookup, its entries are marked dead and parked in the graveyard until
// the state is idle (nullptr: nothing to free now).
static PfEntry *pf_release(PfExtraState *s, PfEntry *list) {
    if (s->busy == 0) {
        PfEntry *grave = s->graveyard;
        s->graveyard = nullptr;
        if (list == nullptr) {
            return grave;
        }
        PfEntry *tail = list;
        while (tail->next != nullptr) {
            tail = tail->next;
        }
        tail->next = grave;
        return list;
    }
    if (list != nullptr) {
        PfEntry *tail = list;
        for (PfEntry *e = list; e != nullptr; e = e->next) {
            e->dead = 1;
            tail = e;
        }
        tail->next = s->graveyard;
        s->graveyard = list;
    }
    return nullptr;
}

// Takes every entry out of `s` (see pf_release for what is returned).
static PfEntry *pf_detach_entries(PfExtraState *s) {
    PfEntry *list = s->entries;
    s->entries = nullptr;
    return pf_release(s, list);
}

// The callback an entry belongs to (borrowed), or nullptr once a weakly held owner died.
static PyObject *pf_entry_owner(const PfEntry *e) {
    if (e->owner == nullptr || !PyWeakref_CheckRef(e->owner)) {
        return e->owner;
    }
    PyObject *obj = PyWeakref_GET_OBJECT(e->owner);
    return obj == Py_None ? nullptr : obj;
}

// Takes the entries `drop` picks out of `s`, keeping the others in order (see pf_release).
template <typename Pick>
static PfEntry *pf_detach_if(PfExtraState *s, Pick drop) {
    PfEntry *keep = nullptr, **keep_tail = &keep, *gone = nullptr, **gone_tail = &gone;
    for (PfEntry *e = s->entries; e != nullptr;) {
        PfEntry *next = e->next;
        e->next = nullptr;
        PfEntry ***tail = drop(e) ? &gone_tail : &keep_tail;
        **tail = e;
        *tail = &e->next;
        e = next;
    }
    s->entries = keep;
    return pf_release(s, gone);
}

extern "C" {

PfExtraState *pf_extra_state_new(void) {
    auto *s = static_cast<PfExtraState *>(std::calloc(1, sizeof(PfExtraState)));
    if (s == nullptr) {
        PyErr_NoMemory();
        return nullptr;
    }
    s->state = PF_STATE_ACTIVE;
    s->list_next = pf_all_states;
    if (pf_all_states != nullptr) {
        pf_all_states->list_prev = s;
    }
    pf_all_states = s;
    return s;
}

// The co_extra freefunc. code_dealloc calls it for every slot, NULL ones included, possibly during
// interpreter finalization: plain C, no pybind11, Python references dropped only while the
// interpreter is fully alive (at exit they are simply left behind).
void pf_extra_state_free(void *p) {
    if (p == nullptr) {
        return;
    }
    auto *s = static_cast<PfExtraState *>(p);
    if (s->list_prev != nullptr) {
        s->list_prev->list_next = s->list_next;
    } else if (pf_all_states == s) {
        pf_all_states = s->list_next;
    }
    if (s->list_next != nullptr) {
        s->list_next->list_prev = s->list_prev;
    }
    PfEntry *entries = s->entries;
    PfEntry *grave = s->graveyard;
    std::free(s);
    bool alive = Py_IsInitialized() && !_Py_IsFinalizing();
    pf_entries_free(entries, alive);
    pf_entries_free(grave, alive);
}

// The localsplus index of PF_EXPORTS_LOCAL in `code` (a plain local), -1 if it has none, -2 with
// an exception set if it is a cell or free variable.
static int pf_exports_slot(PyCodeObject *code) {
    PyObject *names = code->co_localsplusnames;
    for (int i = 0; i < code->co_nlocalsplus; i++) {
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(names, i), PF_EXPORTS_LOCAL) == 0) {
            if (i >= code->co_nlocals) {
                PyErr_SetString(PyExc_ValueError,
                                "pyframe: " PF_EXPORTS_LOCAL " must be a plain local");
                return -2;
            }
            return i;
        }
    }
    return -1;
}

PfEntry *pf_cache_lookup(PfExtraState *s, PyObject *const *fast, int nfast, PyObject *globals,
                         PyObject *builtins, PyObject *closure, PyObject *owner,
                         PyObject **exports) {
    s->busy++;
    PfEntry *hit = nullptr;
    *exports = nullptr;
    for (PfEntry *e = s->entries; e != nullptr; e = e->next) {
        if (owner != nullptr && pf_entry_owner(e) != owner) {
            continue;  // compiled for another backend
        }
        int ok = pf_guards_check_frame(e->root, fast, nfast, globals, builtins, closure, exports);
        if (e->dead) {
            Py_CLEAR(*exports);
            break;  // the guards' own Python code cleared this cache: treat as a miss
        }
        if (ok) {
            hit = e;
            break;
        }
    }
    if (hit != nullptr) {
        hit->hits++;
        if (s->entries != hit) {  // most recently hit first
            PfEntry *prev = s->entries;
            while (prev != nullptr && prev->next != hit) {
                prev = prev->next;
            }
            if (prev != nullptr) {
                prev->next = hit->next;
                hit->next = s->entries;
                s->entries = hit;
            }
        }
    }
    s->busy--;
    return hit;
}

int pf_cache_check_entry(PfExtraState *s, PfEntry *e, PyObject *const *fast, int nfast,
                         PyObject *globals, PyObject *builtins, PyObject *closure,
                         PyObject **exports) {
    s->busy++;  // guards may run Python code that clears this cache: `e` is then parked, not freed
    *exports = nullptr;
    int ok = pf_guards_check_frame(e->root, fast, nfast, globals, builtins, closure, exports);
    if (e->dead) {
        ok = 0;
        Py_CLEAR(*exports);
    }
    s->busy--;
    return ok;
}

PfEntry *pf_cache_add(PfExtraState *s, PyCodeObject *orig, PyObject *code, PyObject *guards,
                      PyObject *info, PyObject *owner) {
    if (!PyCode_Check(code)) {
        PyErr_Format(PyExc_TypeError,
                     "pyframe: a cache entry's code must be a code object, not %.100s",
                     Py_TYPE(code)->tp_name);
        return nullptr;
    }
    void *root = pf_guards_root_of(guards);
    if (root == nullptr) {
        return nullptr;
    }
    int exports_slot = pf_exports_slot(reinterpret_cast<PyCodeObject *>(code));
    if (exports_slot == -2) {
        return nullptr;
    }
    if ((exports_slot >= 0) != (pf_guards_export_count(root) > 0)) {
        PyErr_Format(PyExc_ValueError,
                     "pyframe: the transformed code %s the local " PF_EXPORTS_LOCAL
                     " but its guards export %d values",
                     exports_slot >= 0 ? "reads" : "does not read", pf_guards_export_count(root));
        return nullptr;
    }
    int nmap = 0;
    int *map = pf_code_slot_map(orig, reinterpret_cast<PyCodeObject *>(code), &nmap);
    if (map == nullptr) {
        return nullptr;
    }
    if (s->busy == 0 && s->graveyard != nullptr) {
        PfEntry *grave = s->graveyard;
        s->graveyard = nullptr;
        pf_entries_free(grave, true);
    }
    auto *e = static_cast<PfEntry *>(std::calloc(1, sizeof(PfEntry)));
    if (e == nullptr) {
        std::free(map);
        PyErr_NoMemory();
        return nullptr;
    }
    Py_INCREF(code);
    Py_INCREF(guards);
    Py_INCREF(info);
    e->code = reinterpret_cast<PyCodeObject *>(code);
    e->guards = guards;
    e->root = root;
    e->info = info;
    if (owner != nullptr) {
        e->owner = PyWeakref_NewRef(owner, nullptr);
        if (e->owner == nullptr) {  // no weak references for this type: hold it
            PyErr_Clear();
            e->owner = Py_NewRef(owner);
        }
    }
    e->exports_slot = exports_slot;
    e->nmap = nmap;
    e->slot_map = map;
    e->takes_over = pf_code_takes_over(orig, map);
    e->next = s->entries;
    s->entries = e;
    return e;
}

}  // extern "C"

// ---- Python API ---------------------------------------------------------------------------------

namespace pyframe {
namespace {

// A snapshot of one entry, as returned by get_cache_entries.
struct CacheEntry {
    py::object code, guards, info;
    unsigned long long hits;
    py::object owner;
};

PyCodeObject *as_code(const py::handle &obj) {
    if (!PyCode_Check(obj.ptr())) {
        throw py::type_error(std::string("expected a code object, not ") +
                             Py_TYPE(obj.ptr())->tp_name);
    }
    return reinterpret_cast<PyCodeObject *>(obj.ptr());
}

py::list get_cache_entries(const py::object &code) {
    py::list out;
    PfExtraState *s = pf_code_get_extra(as_code(code));
    if (s == nullptr) {
        return out;
    }
    for (PfEntry *e = s->entries; e != nullptr; e = e->next) {
        out.append(py::cast(CacheEntry{py::reinterpret_borrow<py::object>((PyObject *)e->code),
                                       py::reinterpret_borrow<py::object>(e->guards),
                                       py::reinterpret_borrow<py::object>(e->info), e->hits,
                                       py::reinterpret_borrow<py::object>(
                                           pf_entry_owner(e) ? pf_entry_owner(e) : Py_None)}));
    }
    return out;
}

const char *get_code_state(const py::object &code) {
    PfExtraState *s = pf_code_get_extra(as_code(code));
    int state = s != nullptr ? s->state : PF_STATE_ACTIVE;
    switch (state) {
        case PF_STATE_SKIP:
            return "skip";
        case PF_STATE_RUN_ONLY:
            return "run_only";
        default:
            return "active";
    }
}

void clear_code(const py::object &code, const py::object &owner) {
    PfExtraState *s = pf_code_get_extra(as_code(code));
    if (s == nullptr) {
        return;
    }
    if (!owner.is_none()) {  // one backend's entries only
        PyObject *o = owner.ptr();
        pf_entries_free(pf_detach_if(s, [o](PfEntry *e) { return pf_entry_owner(e) == o; }), true);
        return;
    }
    s->state = PF_STATE_ACTIVE;
    pf_entries_free(pf_detach_entries(s), true);
}

void remove_cache_entry(const py::object &code, const py::object &guards) {
    PfExtraState *s = pf_code_get_extra(as_code(code));
    if (s == nullptr) {
        return;
    }
    PyObject *g = guards.ptr();
    pf_entries_free(pf_detach_if(s, [g](PfEntry *e) { return e->guards == g; }), true);
}

void reset() {
    // Detach everything first (no Python code runs), then free: finalizers run by the frees
    // may themselves free ExtraStates and so edit the list we would otherwise be walking.
    PfEntry *to_free = nullptr;
    for (PfExtraState *s = pf_all_states; s != nullptr; s = s->list_next) {
        s->state = PF_STATE_ACTIVE;
        PfEntry *list = pf_detach_entries(s);
        while (list != nullptr) {
            PfEntry *next = list->next;
            list->next = to_free;
            to_free = list;
            list = next;
        }
    }
    pf_entries_free(to_free, true);
}

}  // namespace

void bind_cache(py::module_ &m) {
    py::class_<CacheEntry>(m, "CacheEntry", py::module_local(),
                           "A snapshot of one cache entry of a code object.")
        .def_readonly("code", &CacheEntry::code, "the transformed code object")
        .def_readonly("guards", &CacheEntry::guards, "its RootGuardManager")
        .def_readonly("info", &CacheEntry::info, "what the callback stored with it")
        .def_readonly("hits", &CacheEntry::hits, "how many calls passed its guards and ran it")
        .def_readonly("owner", &CacheEntry::owner, "the callback (compiler) that made it")
        .def("__repr__", [](const CacheEntry &e) {
            return "<pyframe._C.CacheEntry " +
                   py::repr(e.code.attr("co_name")).cast<std::string>() +
                   " hits=" + std::to_string(e.hits) + ">";
        });
    m.def("get_cache_entries", &get_cache_entries, py::arg("code"),
          "the entries of a code object, most recently hit first");
    m.def("get_code_state", &get_code_state, py::arg("code"),
          "'active', 'skip' or 'run_only'");
    m.def("clear_code", &clear_code, py::arg("code"), py::arg("owner") = py::none(),
          "drop the entries of one code object and make it active again; with `owner`, only the "
          "entries that callback compiled");
    m.def("remove_cache_entry", &remove_cache_entry, py::arg("code"), py::arg("guards"),
          "drop the entry of a code object whose guard tree is `guards` (one that can never hit "
          "again: an object its guards pin has died)");
    m.def("reset", &reset, "clear_code() for every code object pyframe has seen");
}

}  // namespace pyframe
