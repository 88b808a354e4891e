/*
 * cpython_defs.c - our own versions of the CPython 3.11 internals that pyframe needs but that
 * libpython does not export (it is built with -fvisibility=hidden, so referencing e.g.
 * _PyFrame_Clear fails at import with "undefined symbol"; see shared/CPYTHON311.md facts 2-4).
 *
 * Everything here depends on the exact 3.11 layout of _PyInterpreterFrame, PyFrameObject, the
 * thread's data stack and co_extra. Each function names the CPython function it mirrors; they
 * follow CPython's logic but are written for pyframe (no asserts that would abort a release
 * build, public GC functions instead of the internal inline ones).
 *
 * Used by eval_frame.c (shadow frames: push, clear, pop) and by cache.cpp (co_extra, slot maps).
 */
#include "pyframe.h"

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
/* ============================ CPython 3.11 ================================================== */

#define Py_BUILD_CORE
#include <internal/pycore_code.h>   /* _PyLocals_GetKind, CO_FAST_* */
#include <internal/pycore_frame.h>  /* _PyInterpreterFrame, FRAME_OWNED_BY_* */
#include <structmember.h>           /* PyMemberDef, T_OBJECT, T_OBJECT_EX */
#undef Py_BUILD_CORE

#include <stdlib.h>
#include <string.h>

/* ---- co_extra ------------------------------------------------------------------------------ */

/* Mirrors the private holder of Objects/codeobject.c (3.11): co_extra points to this. */
typedef struct {
    Py_ssize_t ce_size;
    void *ce_extras[1];
} pf_CodeObjectExtra;

Py_ssize_t pf_extra_index = -1;

/* Objects/codeobject.c _PyCode_GetExtra, without the type check: the hook only passes codes. */
PfExtraState *
pf_code_get_extra(PyCodeObject *code)
{
    pf_CodeObjectExtra *extra = (pf_CodeObjectExtra *)code->co_extra;
    if (extra == NULL || pf_extra_index < 0 || extra->ce_size <= pf_extra_index) {
        return NULL;
    }
    return (PfExtraState *)extra->ce_extras[pf_extra_index];
}

PfExtraState *
pf_code_ensure_extra(PyCodeObject *code)
{
    PfExtraState *state = pf_code_get_extra(code);
    if (state != NULL) {
        return state;
    }
    state = pf_extra_state_new();
    if (state == NULL) {
        return NULL;
    }
    /* _PyCode_SetExtra grows the per-code array; the slot was empty, so nothing is freed. */
    if (_PyCode_SetExtra((PyObject *)code, pf_extra_index, state) < 0) {
        pf_extra_state_free(state);
        return NULL;
    }
    return state;
}

/* ---- slot maps ----------------------------------------------------------------------------- */

static int
pf_is_generator_like(PyCodeObject *code)
{
    return (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ITERABLE_COROUTINE |
                              CO_ASYNC_GENERATOR)) != 0;
}

/* 3.11 localsplus layout (fact 10): [locals, args first][plain cells][free vars]. Locals and
   cells are matched by name. Free vars are not copied at all: at frame entry their slots are
   still NULL and the shadow's own COPY_FREE_VARS fills them from f_func->func_closure, which
   belongs to the ORIGINAL function - so the new code must list the same free vars in the same
   order. */
int *
pf_code_slot_map(PyCodeObject *orig, PyCodeObject *new_code, int *n)
{
    if (pf_is_generator_like(new_code)) {
        PyErr_Format(PyExc_ValueError,
                     "pyframe: the transformed code %R must not be a generator or coroutine",
                     new_code->co_name);
        return NULL;
    }
    int nfree = orig->co_nfreevars;
    if (new_code->co_nfreevars != nfree) {
        PyErr_Format(PyExc_ValueError,
                     "pyframe: the transformed code %R has %d free variables, the original "
                     "%R has %d; they must match in order",
                     new_code->co_name, new_code->co_nfreevars, orig->co_name, nfree);
        return NULL;
    }
    PyObject *onames = orig->co_localsplusnames;
    PyObject *nnames = new_code->co_localsplusnames;
    int on = orig->co_nlocalsplus, nn = new_code->co_nlocalsplus;
    for (int k = 0; k < nfree; k++) {
        PyObject *a = PyTuple_GET_ITEM(onames, on - nfree + k);
        PyObject *b = PyTuple_GET_ITEM(nnames, nn - nfree + k);
        if (a != b && PyUnicode_Compare(a, b) != 0) {
            if (PyErr_Occurred()) {
                return NULL;
            }
            PyErr_Format(PyExc_ValueError,
                         "pyframe: free variable %d of the transformed code is %R, the "
                         "original %R has %R there",
                         k, b, orig->co_name, a);
            return NULL;
        }
    }

    int *map = (int *)malloc(sizeof(int) * (size_t)(on > 0 ? on : 1));
    if (map == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (int i = 0; i < on; i++) {
        if (_PyLocals_GetKind(orig->co_localspluskinds, i) & CO_FAST_FREE) {
            map[i] = -1;
            continue;
        }
        PyObject *name = PyTuple_GET_ITEM(onames, i);
        int found = -1;
        /* Same index first: a translator usually keeps the original order. */
        if (i < nn - nfree && PyTuple_GET_ITEM(nnames, i) == name) {
            found = i;
        }
        for (int j = 0; found < 0 && j < nn - nfree; j++) {
            PyObject *cand = PyTuple_GET_ITEM(nnames, j);
            if (cand == name || PyUnicode_Compare(cand, name) == 0) {
                found = j;
            }
            else if (PyErr_Occurred()) {
                free(map);
                return NULL;
            }
        }
        if (found < 0) {
            PyErr_Format(PyExc_ValueError,
                         "pyframe: the transformed code %R lacks the local %R of %R (every "
                         "local, argument and cell name of the original must be kept)",
                         new_code->co_name, name, orig->co_name);
            free(map);
            return NULL;
        }
        map[i] = found;
    }
    *n = on;
    return map;
}

/* At entry a frame holds values only in its argument slots (fact 10: initialize_locals binds the
   arguments, every other slot is NULL; cells and free variables are filled later by the code's own
   MAKE_CELL and COPY_FREE_VARS). */
int
pf_code_takes_over(PyCodeObject *orig, const int *map)
{
    int nargs = orig->co_argcount + orig->co_kwonlyargcount +
                ((orig->co_flags & CO_VARARGS) != 0) + ((orig->co_flags & CO_VARKEYWORDS) != 0);
    for (int i = 0; i < nargs; i++) {
        if (map[i] != i) {
            return 0;
        }
    }
    return 1;
}

/* ---- frame objects ------------------------------------------------------------------------- */

/* Objects/frameobject.c _PyFrame_New_NoTrack (3.11). */
static PyFrameObject *
pf_frame_new_notrack(PyCodeObject *code)
{
    int slots = code->co_nlocalsplus + code->co_stacksize;
    PyFrameObject *f = PyObject_GC_NewVar(PyFrameObject, &PyFrame_Type, slots);
    if (f == NULL) {
        return NULL;
    }
    f->f_back = NULL;
    f->f_trace = NULL;
    f->f_trace_lines = 1;
    f->f_trace_opcodes = 0;
    f->f_fast_as_locals = 0;
    f->f_lineno = 0;
    return f;
}

/* Python/frame.c _PyFrame_MakeAndSetFrameObject (3.11.7, including the GH-97002 fix). */
static PyFrameObject *
pf_frame_make_and_set_frame_object(_PyInterpreterFrame *frame)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyFrameObject *f = pf_frame_new_notrack(frame->f_code);
    if (f == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return NULL;
    }
    PyErr_Restore(type, value, tb);
    if (frame->frame_obj) {
        /* Allocating f ran a GC that created this frame's object meanwhile: keep that one and
           make f look like an owned, cleared frame so that its dealloc does nothing harmful. */
        f->f_frame = (_PyInterpreterFrame *)f->_f_frame_data;
        f->f_frame->owner = FRAME_CLEARED;
        f->f_frame->frame_obj = f;
        Py_DECREF(f);
        return frame->frame_obj;
    }
    f->f_frame = frame;
    frame->frame_obj = f;
    return f;
}

/* Include/internal/pycore_frame.h _PyFrame_GetFrameObject (inline, but it calls the hidden
   _PyFrame_MakeAndSetFrameObject). Borrowed reference. */
static PyFrameObject *
pf_frame_get_frame_object(_PyInterpreterFrame *frame)
{
    if (frame->frame_obj != NULL) {
        return frame->frame_obj;
    }
    return pf_frame_make_and_set_frame_object(frame);
}

/* Python/frame.c take_ownership (3.11.7): a frame object outlives its interpreter frame, so the
   frame data moves into the object and f_back is linked through frame objects instead. */
static void
pf_take_ownership(PyFrameObject *f, _PyInterpreterFrame *frame)
{
    Py_ssize_t size = ((char *)&frame->localsplus[frame->stacktop]) - (char *)frame;
    memcpy((_PyInterpreterFrame *)f->_f_frame_data, frame, size);
    frame = (_PyInterpreterFrame *)f->_f_frame_data;
    f->f_frame = frame;
    frame->owner = FRAME_OWNED_BY_FRAME_OBJECT;
    if (_PyFrame_IsIncomplete(frame)) {
        /* Never got past its prologue; it is dead anyway, so pretend the first RESUME ran. */
        PyCodeObject *code = frame->f_code;
        frame->prev_instr = _PyCode_CODE(code) + code->_co_firsttraceable;
    }
    _PyInterpreterFrame *prev = frame->previous;
    while (prev && _PyFrame_IsIncomplete(prev)) {
        prev = prev->previous;
    }
    if (prev) {
        PyFrameObject *back = pf_frame_get_frame_object(prev);
        if (back == NULL) {
            /* Only a MemoryError can get here; CPython drops it as well. */
            PyErr_Clear();
        }
        else {
            f->f_back = (PyFrameObject *)Py_NewRef(back);
        }
        frame->previous = NULL;
    }
    if (!PyObject_GC_IsTracked((PyObject *)f)) {
        PyObject_GC_Track((PyObject *)f);
    }
}

/* Python/frame.c _PyFrame_Clear (3.11.7): drop every reference the frame holds, or hand the
   frame to its frame object if someone (a traceback, sys._getframe()) still holds that. The
   frame must already be unlinked (not tstate->cframe->current_frame). */
void
pf_frame_clear(_PyInterpreterFrame *frame)
{
    if (frame->frame_obj) {
        PyFrameObject *f = frame->frame_obj;
        frame->frame_obj = NULL;
        if (Py_REFCNT(f) > 1) {
            pf_take_ownership(f, frame);
            Py_DECREF(f);
            return;
        }
        Py_DECREF(f);
    }
    for (int i = 0; i < frame->stacktop; i++) {
        Py_XDECREF(frame->localsplus[i]);
    }
    Py_XDECREF(frame->f_locals);
    Py_DECREF(frame->f_func);
    Py_DECREF(frame->f_code);
}

/* ---- the thread's data stack --------------------------------------------------------------- */

/* Python/pystate.c (3.11): chunks come from the object arena allocator
   (_PyObject_VirtualAlloc/Free in Objects/obmalloc.c), which is exported through
   PyObject_GetArenaAllocator. CPython frees our chunks and we free its, so both must agree. */
#define PF_DATA_STACK_CHUNK_SIZE (16 * 1024)
#define PF_MINIMUM_OVERHEAD 1000

/* Python/pystate.c allocate_chunk. */
static _PyStackChunk *
pf_allocate_chunk(int size_in_bytes, _PyStackChunk *previous)
{
    PyObjectArenaAllocator arena;
    PyObject_GetArenaAllocator(&arena);
    _PyStackChunk *res = (_PyStackChunk *)arena.alloc(arena.ctx, size_in_bytes);
    if (res == NULL) {
        return NULL;
    }
    res->previous = previous;
    res->size = size_in_bytes;
    res->top = 0;
    return res;
}

/* Python/pystate.c push_chunk: start a new chunk big enough for `size` words. */
static PyObject **
pf_push_chunk(PyThreadState *tstate, int size)
{
    int allocate_size = PF_DATA_STACK_CHUNK_SIZE;
    while (allocate_size < (int)sizeof(PyObject *) * (size + PF_MINIMUM_OVERHEAD)) {
        allocate_size *= 2;
    }
    _PyStackChunk *chunk = pf_allocate_chunk(allocate_size, tstate->datastack_chunk);
    if (chunk == NULL) {
        return NULL;
    }
    if (tstate->datastack_chunk) {
        tstate->datastack_chunk->top = tstate->datastack_top - &tstate->datastack_chunk->data[0];
    }
    tstate->datastack_chunk = chunk;
    tstate->datastack_limit = (PyObject **)(((char *)chunk) + allocate_size);
    /* The root chunk is never popped: skip its first word so no frame starts at data[0]. */
    PyObject **res = &chunk->data[chunk->previous == NULL];
    tstate->datastack_top = res + size;
    return res;
}

/* Include/internal/pycore_frame.h _PyThreadState_BumpFramePointer together with
   Python/pystate.c _PyThreadState_BumpFramePointerSlow. Unlike CPython's slow path this sets
   MemoryError on every failure (CPython leaves that to _PyEvalFramePushAndInit). */
_PyInterpreterFrame *
pf_datastack_push(PyThreadState *tstate, size_t size)
{
    if (tstate->datastack_top != NULL &&
        size < (size_t)(tstate->datastack_limit - tstate->datastack_top)) {
        _PyInterpreterFrame *res = (_PyInterpreterFrame *)tstate->datastack_top;
        tstate->datastack_top += size;
        return res;
    }
    if (size > INT_MAX / 2) {
        PyErr_NoMemory();
        return NULL;
    }
    _PyInterpreterFrame *res = (_PyInterpreterFrame *)pf_push_chunk(tstate, (int)size);
    if (res == NULL) {
        PyErr_NoMemory();
    }
    return res;
}

/* Python/pystate.c _PyThreadState_PopFrame: strictly LIFO; frees the chunk the frame began. */
void
pf_datastack_pop(PyThreadState *tstate, _PyInterpreterFrame *frame)
{
    PyObject **base = (PyObject **)frame;
    if (base == &tstate->datastack_chunk->data[0]) {
        _PyStackChunk *chunk = tstate->datastack_chunk;
        _PyStackChunk *previous = chunk->previous;
        PyObjectArenaAllocator arena;
        PyObject_GetArenaAllocator(&arena);
        tstate->datastack_top = &previous->data[previous->top];
        tstate->datastack_chunk = previous;
        arena.free(arena.ctx, chunk, chunk->size);
        tstate->datastack_limit = (PyObject **)(((char *)previous) + previous->size);
    }
    else {
        tstate->datastack_top = base;
    }
}

/* ---- versions of dicts and instance dicts (guard trees skipping unchanged subtrees) --------- */

/* (pf_dict_version is inline, in pyframe.h, under the same version check.) */

/* The instance dict of `obj`, or NULL if it has none (no exception left set). In 3.11 an object
   of a heap type may keep its attributes in inline values instead of a dict; asking for the dict
   pointer materializes the dict, and from then on every attribute store goes through it (and so
   bumps its version). Borrowed. */
PyObject *pf_instance_dict(PyObject *obj)
{
    PyObject **dictptr = pf_instance_dict_slot(obj);
    return dictptr != NULL ? *dictptr : NULL;
}

PyObject **pf_instance_dict_slot(PyObject *obj)
{
    PyObject **dictptr = _PyObject_GetDictPtr(obj);
    if (dictptr == NULL) {
        PyErr_Clear();
    }
    return dictptr;
}

/* ---- attributes kept in a field of the object's own struct ------------------------------------ */

/* Where `obj` keeps the value `getattr(obj, name)` gives, when that is a field of obj's struct read
   with no code run: a function's __code__, __defaults__, __kwdefaults__, __annotations__, __dict__,
   __name__ and __qualname__ (getters of Objects/funcobject.c that return the field, or None for
   an empty __defaults__/__kwdefaults__), a cell's cell_contents, or a slot: an object member
   (T_OBJECT or T_OBJECT_EX, Include/structmember.h) that type(obj)'s MRO holds under `name` as a
   member descriptor, which a generic lookup prefers to the instance dict. NULL otherwise. The
   address is fixed for the object's life; the caller checks the lookup is the generic one and
   records type(obj)'s version (the member descriptor found through it). */
PyObject **pf_attr_field(PyObject *obj, PyObject *name)
{
    if (PyFunction_Check(obj)) {
        PyFunctionObject *fn = (PyFunctionObject *)obj;
        static const struct { const char *name; size_t offset; } fields[] = {
            {"__code__", offsetof(PyFunctionObject, func_code)},
            {"__defaults__", offsetof(PyFunctionObject, func_defaults)},
            {"__kwdefaults__", offsetof(PyFunctionObject, func_kwdefaults)},
            {"__annotations__", offsetof(PyFunctionObject, func_annotations)},
            {"__dict__", offsetof(PyFunctionObject, func_dict)},
            {"__name__", offsetof(PyFunctionObject, func_name)},
            {"__qualname__", offsetof(PyFunctionObject, func_qualname)},
        };
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
            if (PyUnicode_CompareWithASCIIString(name, fields[i].name) == 0) {
                return (PyObject **)((char *)fn + fields[i].offset);
            }
        }
    }
    if (PyCell_Check(obj) && PyUnicode_CompareWithASCIIString(name, "cell_contents") == 0) {
        return &((PyCellObject *)obj)->ob_ref;
    }
    PyObject *descr = _PyType_Lookup(Py_TYPE(obj), name);
    if (descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if ((member->type == T_OBJECT || member->type == T_OBJECT_EX) && !(member->flags & READ_RESTRICTED)) {
            return (PyObject **)((char *)obj + member->offset);
        }
    }
    return NULL;
}

/* ---- the mapping behind a mappingproxy (guards on a class's __dict__) --------------------------- */

/* 3.11 Objects/descrobject.c: mappingproxyobject, a struct no header exports (`Cls.__dict__` is a
   new proxy at each read, over the class's one dict). */
typedef struct {
    PyObject_HEAD
    PyObject *mapping;
} pf_mappingproxyobject;

PyObject *pf_mappingproxy_mapping(PyObject *proxy)
{
    if (!Py_IS_TYPE(proxy, &PyDictProxy_Type)) {
        return NULL;
    }
    return ((pf_mappingproxyobject *)proxy)->mapping;
}

/* ---- the rest of a tuple iterator (guards on a loop's iterator passed to a resume function) -- */

/* 3.11 Objects/tupleobject.c: tupleiterobject, a struct no header exports. it_seq is NULL once
   the iterator is exhausted. */
typedef struct {
    PyObject_HEAD
    Py_ssize_t it_index;
    PyTupleObject *it_seq;
} pf_tupleiterobject;

PyObject *pf_tuple_iterator_rest(PyObject *it)
{
    if (Py_TYPE(it) != &PyTupleIter_Type) {
        PyErr_SetString(PyExc_TypeError, "tuple_iterator_rest: not a tuple iterator");
        return NULL;
    }
    pf_tupleiterobject *ti = (pf_tupleiterobject *)it;
    if (ti->it_seq == NULL) {
        return PyTuple_New(0);
    }
    return PyTuple_GetSlice((PyObject *)ti->it_seq, ti->it_index, PyTuple_GET_SIZE(ti->it_seq));
}

/* ---- the referent of a weak reference (guards on a value a module keeps weakly) ----------- */

/* PyWeakref_GET_OBJECT gives Py_None for a dead referent, and for one being deallocated (its
   count already 0), as calling the weakref does; no Python code runs. */
PyObject *pf_weakref_referent(PyObject *ref)
{
    if (!PyWeakref_CheckRef(ref)) {
        PyErr_SetString(PyExc_TypeError, "weakref_referent: not a weakref.ref");
        return NULL;
    }
    return Py_NewRef(PyWeakref_GET_OBJECT(ref));
}

/* ---- a type's version tag (snapshots record it: guard_snapshot.h) ------------------------- */

/* 3.11 Objects/typeobject.c: a type loses its version tag on every change (PyType_Modified) and
   gets a new one at the next lookup through the method cache (_PyType_Lookup with a cacheable name
   calls assign_version_tag); 3.12 adds PyUnstable_Type_AssignVersionTag for this. */
int pf_type_assign_version_tag(PyTypeObject *tp)
{
    static PyObject *name = NULL;
    if (!PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG)) {
        if (name == NULL) {
            name = PyUnicode_InternFromString("__getattribute__");
            if (name == NULL) {
                PyErr_Clear();
                return 0;
            }
        }
        (void)_PyType_Lookup(tp, name);  /* (never raises) */
    }
    return PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG);
}

#else
/* Each function above mirrors a 3.11 source (frame.c, frameobject.c, pystate.c, codeobject.c):
   re-check every one of them, and csrc/eval_frame.c, against the new version before porting. */
#error "pyframe's C layer supports CPython 3.11 only (see csrc/cpython_defs.c)"
#endif
