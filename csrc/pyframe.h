/*
 * pyframe.h - the one interface between the C half and the C++ half of pyframe._C.
 *
 *   C   (eval_frame.c, cpython_defs.c): the PEP 523 hook, shadow frames, and our copies of the
 *        CPython 3.11 frame internals. Only these files see CPython's internal headers.
 *   C++ (cache.cpp, guard_*.cpp + leaves.cpp + torch_leaves.cpp, module.cpp): the per-code
 *        cache, the guard trees, and the pybind11 module. They know Python objects, never frames.
 *
 * The hot path (a cache hit) crosses this header as plain C calls on raw pointers: the hook hands
 * the cache the frame's fast locals, globals, builtins and closure, and gets back a PfEntry whose
 * code and slot map it needs to build the shadow frame. No pybind11 cast happens per call.
 */
#ifndef PYFRAME_H
#define PYFRAME_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The cache (layout shared by C and C++; owned by cache.cpp) -------------------------- */

/* The local of a transformed code that receives its guards' exports: the tuple of values the
   guard tree fetched for the nodes marked with export() (the graph's inputs, see
   docs/c_layer.md section 5), set by the hook before the code runs. */
#define PF_EXPORTS_LOCAL "___guard_exports"

/* ExtraState.state: what the hook does with a code object. */
enum {
    PF_STATE_ACTIVE = 0,   /* use the entries; on a miss call the callback */
    PF_STATE_SKIP = 1,     /* run normally, never look at entries or call back */
    PF_STATE_RUN_ONLY = 2  /* use the entries; on a miss run normally, never call back */
};

/* One compiled version of a code object: run `code` when the guards pass. */
typedef struct PfEntry {
    struct PfEntry *next;
    PyCodeObject *code;    /* strong: the transformed code */
    PyObject *guards;      /* strong: the _C.RootGuardManager Python object */
    void *root;            /* the C++ RootGuardManager inside `guards` (kept alive by it) */
    PyObject *info;        /* strong: anything the Python side wants kept with the entry */
    PyObject *owner;       /* the callback that compiled it (a hit needs the same one): a weak
                              reference when it supports them (a strong one would make a cycle
                              through co_extra whenever it refers to the function), else strong */
    unsigned long long hits;
    int exports_slot;      /* localsplus index of PF_EXPORTS_LOCAL in `code`, or -1 */
    int nmap;              /* co_nlocalsplus of the ORIGINAL code */
    int *slot_map;         /* original localsplus index -> new index, or -1 (free vars) */
    int takes_over;        /* the code can run in the original frame itself (pf_code_takes_over) */
    int dead;              /* dropped by clear_code/reset while a lookup was running */
} PfEntry;

/* What lives in a code object's co_extra slot (malloc'd; freed with the code object). */
typedef struct PfExtraState {
    int state;                       /* PF_STATE_* */
    int busy;                        /* lookups in progress (guards may run Python code) */
    PfEntry *entries;                /* most recently hit first */
    PfEntry *graveyard;              /* entries dropped while busy, freed when busy drops to 0 */
    struct PfExtraState *list_prev;  /* intrusive list of every ExtraState, for reset() */
    struct PfExtraState *list_next;
} PfExtraState;

/* ---- eval_frame.c -------------------------------------------------------------------------- */

/* Creates the C types (CallbackScope, FrameInfo, sentinels), requests the co_extra index and adds
   set_eval_frame to `module`. Returns -1 with an exception set on failure. */
int pf_eval_frame_init(PyObject *module);

/* The two sentinels a callback may return (borrowed references, alive for the process). */
extern PyObject *pf_SKIP;
extern PyObject *pf_RUN_ONLY;

/* Small introspection helper for tests: (hook installed and ours, active threads, chained). */
PyObject *pf_hook_state(void);

/* ---- module_call.c ------------------------------------------------------------------------- */

/* Adds the ModuleCall and InstanceCall types (nn.Module calls without Python frames of pyframe's or
 * Module.__call__'s). */
int pf_module_call_init(PyObject *module);

/* ---- cpython_defs.c: version-specific pieces the C++ side needs ----------------------------- */

/* The ExtraState of `code`, or NULL if it has none (never raises). */
PfExtraState *pf_code_get_extra(PyCodeObject *code);
/* The ExtraState of `code`, created on first use. NULL with an exception on failure. */
PfExtraState *pf_code_ensure_extra(PyCodeObject *code);
/* Builds the slot map from `orig`'s localsplus to `new_code`'s by name. Returns a malloc'd array
   of orig->co_nlocalsplus ints (stored in *n), or NULL with ValueError/MemoryError set. */
int *pf_code_slot_map(PyCodeObject *orig, PyCodeObject *new_code, int *n);
/* 1 if `new_code` can take over a frame of `orig` at entry (see eval_frame.c pf_eval_entry):
   `map` (from pf_code_slot_map) keeps every argument slot at its index, so the only values the
   frame holds at entry are already where the new code reads them. */
int pf_code_takes_over(PyCodeObject *orig, const int *map);
/* A dict's version: changes whenever the dict's contents change (never for an unchanged dict).
   Version-specific like cpython_defs.c, but inline: the guard trees' snapshots read hundreds of
   these per cached call. 3.11 bumps ma_version_tag (from one global counter) on every change of
   a dict's contents; 3.12 keeps the field with watcher bits in its low byte; 3.14 removes it. */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
static inline unsigned long long pf_dict_version(PyObject *dict)
{
    return ((PyDictObject *)dict)->ma_version_tag;
}
#endif
/* The instance dict of `obj` (borrowed; materialized if the object kept inline values), or NULL. */
PyObject *pf_instance_dict(PyObject *obj);
/* Where `obj` keeps its instance dict (materialized as above), or NULL: the slot's address is fixed
   for the object's life, so a later check reads the current dict with one load. */
PyObject **pf_instance_dict_slot(PyObject *obj);
/* Where `obj` keeps getattr(obj, name) in its own struct (a function's __code__, a cell's contents, a
   slot), or NULL: a later check compares one load with the value fetched. */
PyObject **pf_attr_field(PyObject *obj, PyObject *name);
/* The mapping a mappingproxy reads (borrowed: `Cls.__dict__`'s is the class's dict), or NULL (no
   exception set) if `proxy` is not a mappingproxy. */
PyObject *pf_mappingproxy_mapping(PyObject *proxy);
/* The items a tuple iterator has still to give, as a new tuple (NULL with TypeError if `it` is
   not a tuple iterator). */
PyObject *pf_tuple_iterator_rest(PyObject *it);
/* `ref()` for a weakref.ref (or a subclass): its referent as a new reference, None once it died
   (NULL with TypeError if `ref` is no weakref.ref). */
PyObject *pf_weakref_referent(PyObject *ref);
/* Whether `tp` has a valid version tag, giving it one if it lost it to a change (never raises). */
int pf_type_assign_version_tag(PyTypeObject *tp);
/* The co_extra index requested by pf_eval_frame_init (-1 before). */
extern Py_ssize_t pf_extra_index;

/* Shadow-frame plumbing for eval_frame.c (copies of hidden CPython functions). */
struct _PyInterpreterFrame;
/* Bumps `size` words on the thread's data stack (new chunk if needed); NULL + MemoryError. */
struct _PyInterpreterFrame *pf_datastack_push(PyThreadState *tstate, size_t size);
/* Pops a frame pushed by pf_datastack_push (LIFO). */
void pf_datastack_pop(PyThreadState *tstate, struct _PyInterpreterFrame *frame);
/* Drops the frame's references, or moves it into its frame object if that outlives it. */
void pf_frame_clear(struct _PyInterpreterFrame *frame);

/* ---- cache.cpp ------------------------------------------------------------------------------ */

PfExtraState *pf_extra_state_new(void);   /* NULL with MemoryError */
void pf_extra_state_free(void *state);    /* the co_extra freefunc: tolerates NULL/finalization */

/* First entry of `owner` (any owner if NULL: run-only mode) whose guards pass, moved to the front
   with its hit count bumped; NULL on a miss. On a hit, *exports is its guards' exports (a new
   reference) or NULL if they export nothing.
   `fast`/`nfast` are the frame's localsplus. Never leaves an exception set. */
PfEntry *pf_cache_lookup(PfExtraState *state, PyObject *const *fast, int nfast,
                         PyObject *globals, PyObject *builtins, PyObject *closure, PyObject *owner,
                         PyObject **exports);

/* Checks the guards of entry `e` of `state` (no hit counted): 1 with *exports set as by
   pf_cache_lookup, or 0 when they fail or Python code they ran dropped `e` (then unusable). */
int pf_cache_check_entry(PfExtraState *state, PfEntry *e, PyObject *const *fast, int nfast,
                         PyObject *globals, PyObject *builtins, PyObject *closure,
                         PyObject **exports);

/* Validates (code, guards, info), builds the slot map against `orig` and pushes a new entry at
   the front of `state`. NULL with an exception (TypeError/ValueError) on failure; `code` must
   have the local PF_EXPORTS_LOCAL exactly when the guards export something. */
PfEntry *pf_cache_add(PfExtraState *state, PyCodeObject *orig, PyObject *code,
                      PyObject *guards, PyObject *info, PyObject *owner);

/* ---- guard trees (guard_bindings.cpp, guard_check.cpp) ------------------------------------------ */

/* The C++ RootGuardManager held by a _C.RootGuardManager object, or NULL with TypeError. */
void *pf_guards_root_of(PyObject *obj);

/* Runs a guard tree against a frame: 1 = passes, 0 = fails. Never leaves an exception set.
   When it passes and `exports` is not NULL, *exports is the tuple of exported values (a new
   reference), or NULL if the tree exports nothing. */
int pf_guards_check_frame(void *root, PyObject *const *fast, int nfast,
                          PyObject *globals, PyObject *builtins, PyObject *closure,
                          PyObject **exports);
/* How many values the tree exports (0: none). */
int pf_guards_export_count(void *root);

#ifdef __cplusplus
} /* extern "C" */

/* C++-only: the pybind11 halves of the module, called from module.cpp. */
#include <pybind11/pybind11.h>
namespace pyframe {
void bind_guards(pybind11::module_ &m);
void bind_cache(pybind11::module_ &m);
}  // namespace pyframe
#endif

#endif /* PYFRAME_H */
