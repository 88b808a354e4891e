/*
 * eval_frame.c - the PEP 523 hook of pyframe (see docs/c_layer.md sections 1, 2 and 4).
 *
 * Flow of one Python call while the hook is installed:
 *
 *   _PyEval_Vector pushes the frame -> pf_eval_frame(tstate, frame, throwflag)
 *     handed down the chain by us     -> CPython (the chain came back to us: decided already)
 *     thread callback None            -> previous eval function (CPython's or torch._dynamo's)
 *     generator / resumed / throwflag -> previous eval function
 *     code SKIP                       -> previous eval function
 *     an entry's guards pass          -> the entry's code runs in the frame itself (a shadow
 *                                        frame when it cannot take the frame over)
 *     miss, callback callable         -> callback(FrameInfo) decides: run normally, SKIP,
 *                                        RUN_ONLY, or a new entry that runs as on a hit
 *   _PyEval_Vector clears and pops the original frame afterwards (3.11: the caller owns it).
 *
 * The callback is per thread (a C11 thread-local holding a strong reference, NULL meaning
 * None); the hook is per interpreter and installed only while some thread has a callback.
 * CallbackScope is the cheap wrapper pyframe.optimize/disable return: it swaps the thread's
 * callback around one vectorcall.
 */
#include "pyframe.h"

#include <stddef.h>
#include <structmember.h>  /* PyMemberDef, T_OBJECT, READONLY (3.11) */

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
/* ============================ CPython 3.11 ==================================================
 * This whole file reads _PyInterpreterFrame (Include/internal/pycore_frame.h, 3.11) and the
 * 3.11 eval-function signature (Include/cpython/pystate.h _PyFrameEvalFunction). The frame
 * facts it relies on are CPYTHON311.md facts 9-16 (Python/ceval.c _PyEval_Vector,
 * _PyEvalFramePushAndInit, initialize_locals; Python/frame.c). */

#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#if defined(__GNUC__)
#define PF_LIKELY(x) __builtin_expect(!!(x), 1)
#define PF_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define PF_LIKELY(x) (x)
#define PF_UNLIKELY(x) (x)
#endif

/* Frames of these codes are never shadowed: their first call only builds the generator
   object (RETURN_GENERATOR), and later resumptions arrive owned by the generator. */
#define PF_GENERATOR_FLAGS \
    (CO_GENERATOR | CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR)

/* ---- per-thread callback, per-interpreter hook --------------------------------------------- */

/* Read on every frame: the initial-exec TLS model makes each access one %fs-relative load
   instead of a __tls_get_addr call (the default for a shared object). Two pointers fit easily in
   the static TLS surplus glibc reserves for dlopen'ed libraries. */
#if defined(__GNUC__)
#define PF_TLS _Thread_local __attribute__((tls_model("initial-exec")))
#else
#define PF_TLS _Thread_local
#endif

/* Strong reference; NULL means None. Py_False means "run only". */
static PF_TLS PyObject *pf_tls_callback = NULL;
/* The frame this thread is currently handing to the previous eval function (loop breaker). */
static PF_TLS _PyInterpreterFrame *pf_tls_delegating = NULL;

/* Number of threads whose callback is not None (protected by the GIL). */
static int pf_active_threads = 0;
/* The eval function that was installed when pyframe installed its hook; NULL = CPython's. */
static _PyFrameEvalFunction pf_prev_eval = NULL;

static PyObject *pf_eval_frame(PyThreadState *tstate, _PyInterpreterFrame *frame, int throwflag);

static void
pf_hook_install(PyInterpreterState *interp)
{
    _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(interp);
    if (current == pf_eval_frame) {
        return;
    }
    /* Chain to whatever is there (torch._dynamo's shim, say). If we are still somewhere below
       it in its own chain, frames may come back to us: pf_eval_previous breaks that loop. */
    pf_prev_eval = (current == _PyEval_EvalFrameDefault) ? NULL : current;
    _PyInterpreterState_SetEvalFrameFunc(interp, pf_eval_frame);
}

static void
pf_hook_uninstall(PyInterpreterState *interp)
{
    /* Only if we are still on top: someone who installed after us chains to us and will put
       us back when they leave; removing ourselves from under them would break their chain. */
    if (_PyInterpreterState_GetEvalFrameFunc(interp) != pf_eval_frame) {
        return;
    }
    _PyInterpreterState_SetEvalFrameFunc(
        interp, pf_prev_eval != NULL ? pf_prev_eval : _PyEval_EvalFrameDefault);
    pf_prev_eval = NULL;
}

/* Puts `callback` (a new reference, or NULL for None) in this thread's slot and returns the old
   one (a reference the caller now owns). Installs/uninstalls the hook when the thread turns
   active/inactive. */
static PyObject *
pf_callback_exchange(PyObject *callback)
{
    PyObject *old = pf_tls_callback;
    pf_tls_callback = callback;
    if (callback != NULL) {
        if (old == NULL) {
            pf_active_threads++;
        }
        /* Also when the thread was already active: another hook may have taken ours out of
           the chain meanwhile (torch._dynamo restores its own previous function when its last
           thread turns inactive, whatever is installed at that moment). */
        pf_hook_install(PyThreadState_GET()->interp);
    }
    else if (old != NULL) {
        if (pf_active_threads > 0 && --pf_active_threads == 0) {
            pf_hook_uninstall(PyThreadState_GET()->interp);
        }
    }
    return old;
}

/* While a callback compiles, no frame of this thread is the hook's to decide (its slot is NULL),
   yet every Python call of the compiler would still pass through the hook, and CPython 3.11
   inlines no Python-to-Python call while an eval function is installed (ceval's CALL checks
   interp->eval_frame == NULL). So when this thread is the only one using the hook and nothing is
   chained below it, the hook steps out of the interpreter for the callback: the translator, all
   Python, runs with CPython's inlined calls. A thread that turns active meanwhile installs it
   again (pf_callback_exchange); pf_step_back puts it back either way. */
static int
pf_step_aside(PyInterpreterState *interp)
{
    if (pf_active_threads != 1 || pf_prev_eval != NULL ||
        _PyInterpreterState_GetEvalFrameFunc(interp) != pf_eval_frame) {
        return 0;
    }
    _PyInterpreterState_SetEvalFrameFunc(interp, _PyEval_EvalFrameDefault);
    return 1;
}

static void
pf_step_back(PyInterpreterState *interp, int stepped_aside)
{
    if (stepped_aside && pf_active_threads > 0) {
        pf_hook_install(interp);
    }
}

/* The hook clears the thread's slot (without touching the counts) while guards or the callback
   run, so neither is ever compiled. This puts `callback` back and returns whatever Python code
   left in the slot meanwhile (normally NULL), for the caller to drop when it is safe. */
static PyObject *
pf_callback_return(PyObject *callback)
{
    PyObject *stale = pf_tls_callback;
    pf_tls_callback = callback;
    if (PF_UNLIKELY(stale != NULL)) {
        pf_active_threads--;  /* counted when it was set; this thread stays counted */
    }
    return stale;
}

/* ---- sentinels ----------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    const char *name;
} PfSentinel;

static PyObject *
pf_sentinel_repr(PyObject *self)
{
    return PyUnicode_FromFormat("pyframe._C.%s", ((PfSentinel *)self)->name);
}

static PyTypeObject PfSentinel_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyframe._C._Sentinel",
    .tp_basicsize = sizeof(PfSentinel),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_repr = pf_sentinel_repr,
    .tp_doc = "SKIP or RUN_ONLY: what a callback returns to change a code object's state.",
};

PyObject *pf_SKIP = NULL;
PyObject *pf_RUN_ONLY = NULL;

/* ---- FrameInfo ----------------------------------------------------------------------------- */

/* What the callback sees of a frame. It never changes the frame: f_locals is read straight from
   the localsplus slots (no FastToLocals, no COPY_FREE_VARS). `frame` is only valid during the
   callback; if the callback keeps the object, f_locals is built before the frame goes away. */
typedef struct {
    PyObject_HEAD
    _PyInterpreterFrame *frame;
    PyObject *code, *func, *globals, *builtins, *closure;
    PyObject *locals;  /* built on first use */
} PfFrameInfo;

static PyTypeObject PfFrameInfo_Type;

static PyObject *
pf_frameinfo_new(_PyInterpreterFrame *frame)
{
    PfFrameInfo *self = PyObject_GC_New(PfFrameInfo, &PfFrameInfo_Type);
    if (self == NULL) {
        return NULL;
    }
    PyFunctionObject *func = frame->f_func;
    self->frame = frame;
    self->code = Py_NewRef(frame->f_code);
    self->func = Py_NewRef(func);
    self->globals = Py_NewRef(frame->f_globals);
    self->builtins = Py_NewRef(frame->f_builtins);
    self->closure = Py_NewRef(func->func_closure != NULL ? func->func_closure : Py_None);
    self->locals = NULL;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static PyObject *
pf_frameinfo_build_locals(_PyInterpreterFrame *frame)
{
    PyCodeObject *code = frame->f_code;
    PyObject *d = PyDict_New();
    if (d == NULL) {
        return NULL;
    }
    /* At entry only arguments are bound; a cell argument still holds its raw value because
       MAKE_CELL has not run (fact 10). Free-variable slots are NULL and are skipped. */
    for (int i = 0; i < code->co_nlocalsplus; i++) {
        PyObject *value = frame->localsplus[i];
        if (value == NULL) {
            continue;
        }
        if (PyDict_SetItem(d, PyTuple_GET_ITEM(code->co_localsplusnames, i), value) < 0) {
            Py_DECREF(d);
            return NULL;
        }
    }
    return d;
}

static PyObject *
pf_frameinfo_get_locals(PfFrameInfo *self, void *Py_UNUSED(closure))
{
    if (self->locals == NULL) {
        if (self->frame == NULL) {
            PyErr_SetString(PyExc_RuntimeError,
                            "FrameInfo.f_locals: the frame is gone (it could not be read "
                            "before the callback returned)");
            return NULL;
        }
        self->locals = pf_frameinfo_build_locals(self->frame);
        if (self->locals == NULL) {
            return NULL;
        }
    }
    /* A new dict each time: callers may mutate what they get. */
    return PyDict_Copy(self->locals);
}

/* Called when the callback returns: the frame must not be read any more. */
static void
pf_frameinfo_detach(PyObject *obj)
{
    PfFrameInfo *self = (PfFrameInfo *)obj;
    if (Py_REFCNT(obj) > 1 && self->locals == NULL) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        self->locals = pf_frameinfo_build_locals(self->frame);
        if (self->locals == NULL) {
            PyErr_Clear();
        }
        PyErr_Restore(type, value, tb);
    }
    self->frame = NULL;
}

static int
pf_frameinfo_traverse(PfFrameInfo *self, visitproc visit, void *arg)
{
    Py_VISIT(self->code);
    Py_VISIT(self->func);
    Py_VISIT(self->globals);
    Py_VISIT(self->builtins);
    Py_VISIT(self->closure);
    Py_VISIT(self->locals);
    return 0;
}

static int
pf_frameinfo_clear(PfFrameInfo *self)
{
    Py_CLEAR(self->code);
    Py_CLEAR(self->func);
    Py_CLEAR(self->globals);
    Py_CLEAR(self->builtins);
    Py_CLEAR(self->closure);
    Py_CLEAR(self->locals);
    return 0;
}

static void
pf_frameinfo_dealloc(PfFrameInfo *self)
{
    PyObject_GC_UnTrack(self);
    pf_frameinfo_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *
pf_frameinfo_repr(PfFrameInfo *self)
{
    PyCodeObject *code = (PyCodeObject *)self->code;
    return PyUnicode_FromFormat("<pyframe._C.FrameInfo %U at %U:%d>", code->co_qualname,
                                code->co_filename, code->co_firstlineno);
}

static PyMemberDef pf_frameinfo_members[] = {
    {"f_code", T_OBJECT, offsetof(PfFrameInfo, code), READONLY, "the code object"},
    {"f_func", T_OBJECT, offsetof(PfFrameInfo, func), READONLY, "the function being called"},
    {"f_globals", T_OBJECT, offsetof(PfFrameInfo, globals), READONLY, "the globals dict"},
    {"f_builtins", T_OBJECT, offsetof(PfFrameInfo, builtins), READONLY, "the builtins dict"},
    {"closure", T_OBJECT, offsetof(PfFrameInfo, closure), READONLY,
     "f_func.__closure__ (a tuple of cells, or None)"},
    {NULL},
};

static PyGetSetDef pf_frameinfo_getset[] = {
    {"f_locals", (getter)pf_frameinfo_get_locals, NULL,
     "a new dict: name -> value of every bound local slot at frame entry", NULL},
    {NULL},
};

static PyTypeObject PfFrameInfo_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyframe._C.FrameInfo",
    .tp_basicsize = sizeof(PfFrameInfo),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A read-only view of a frame at entry, handed to the callback on a cache miss.",
    .tp_dealloc = (destructor)pf_frameinfo_dealloc,
    .tp_traverse = (traverseproc)pf_frameinfo_traverse,
    .tp_clear = (inquiry)pf_frameinfo_clear,
    .tp_repr = (reprfunc)pf_frameinfo_repr,
    .tp_members = pf_frameinfo_members,
    .tp_getset = pf_frameinfo_getset,
};

/* ---- running frames ------------------------------------------------------------------------ */

/* Run `frame` as if pyframe were not there: through the eval function we chained to. */
static inline PyObject *
pf_eval_previous(_PyFrameEvalFunction prev, PyThreadState *tstate, _PyInterpreterFrame *frame,
                 int throwflag)
{
    if (PF_LIKELY(prev == NULL) || PF_UNLIKELY(pf_tls_delegating == frame)) {
        /* No one below us, or the chain looped back to us (we were re-installed on top of a
           hook that itself chains to us): CPython runs it. */
        return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
    }
    _PyInterpreterFrame *saved = pf_tls_delegating;
    pf_tls_delegating = frame;
    PyObject *result = prev(tstate, frame, throwflag);
    pf_tls_delegating = saved;
    return result;
}

/* Shadow frames run so far, all threads (_C._shadow_frames(), for tests; the GIL guards it). */
static unsigned long long pf_shadow_frames = 0;

/* Run entry `e` for `frame` in a shadow frame (docs/c_layer.md section 4; CPYTHON311.md fact
   15). `exports` (stolen, may be NULL) are its guards' exports, stored in the entry's exports
   slot. `stale` is a reference to drop once the shadow is set up (see pf_callback_return). */
static PyObject *
pf_eval_shadow(PyThreadState *tstate, _PyInterpreterFrame *frame, PfEntry *e, PyObject *exports,
               PyObject *stale)
{
    pf_shadow_frames++;
    PyCodeObject *code = e->code;
    int nlocalsplus = code->co_nlocalsplus;
    size_t size = (size_t)nlocalsplus + (size_t)code->co_stacksize + FRAME_SPECIALS_SIZE;
    _PyInterpreterFrame *shadow = pf_datastack_push(tstate, size);
    if (shadow == NULL) {
        Py_XDECREF(exports);
        Py_XDECREF(stale);
        return NULL;
    }
    /* Include/internal/pycore_frame.h _PyFrame_InitializeSpecials, from the ORIGINAL function
       (COPY_FREE_VARS reads f_func->func_closure; globals/builtins are the original's) with
       f_code replaced by the entry's code. */
    shadow->f_func = (PyFunctionObject *)Py_NewRef(frame->f_func);
    shadow->f_code = (PyCodeObject *)Py_NewRef(code);
    shadow->f_globals = frame->f_globals;
    shadow->f_builtins = frame->f_builtins;
    shadow->f_locals = Py_XNewRef(frame->f_locals);
    shadow->stacktop = nlocalsplus;
    shadow->frame_obj = NULL;
    shadow->prev_instr = _PyCode_CODE(code) - 1;
    shadow->is_entry = false;
    shadow->owner = FRAME_OWNED_BY_THREAD;
    PyObject **dst = shadow->localsplus;
    for (int i = 0; i < nlocalsplus; i++) {
        dst[i] = NULL;
    }
    /* The original keeps its references: _PyEval_Vector clears it after we return. */
    PyObject **src = frame->localsplus;
    const int *map = e->slot_map;
    for (int i = 0, n = e->nmap; i < n; i++) {
        PyObject *value = src[i];
        if (value != NULL && map[i] >= 0) {
            dst[map[i]] = Py_NewRef(value);
        }
    }
    if (e->exports_slot >= 0) {
        dst[e->exports_slot] = exports;
    } else {
        Py_XDECREF(exports);
    }
    Py_XDECREF(stale);

    PyObject *result = _PyEval_EvalFrameDefault(tstate, shadow, 0);

    /* 3.11 leaves an entry frame to its caller (fact 13): we are that caller. */
    pf_frame_clear(shadow);
    pf_datastack_pop(tstate, shadow);
    return result;
}

static inline Py_ssize_t
pf_code_framesize(PyCodeObject *code)
{
    /* the words _PyEvalFramePushAndInit bumps for a frame of `code` (3.11 has no co_framesize) */
    return code->co_nlocalsplus + code->co_stacksize + FRAME_SPECIALS_SIZE;
}

/* Let entry `e`'s code take over `frame` itself (no second frame): possible when the frame is the
   top of the thread's data stack with room for the new code's size, and the entry's slot map
   keeps every argument in its slot (e->takes_over). The frame then becomes a frame of the new
   code: its other slots NULL (they are at entry, facts 9-10; the slots past the original's are
   its old value stack), its f_code, stack top and first instruction the new code's. f_func,
   globals and builtins stay the original's, as a shadow frame's would (COPY_FREE_VARS reads the
   original closure). _PyEval_Vector clears and pops it afterwards (fact 12) by its new f_code,
   which covers every slot the new code used. Returns 0, changing nothing, when it cannot. */
static inline int
pf_frame_take_over(PyThreadState *tstate, _PyInterpreterFrame *frame, PyCodeObject *code)
{
    PyCodeObject *orig = frame->f_code;
    PyObject **base = (PyObject **)frame;
    if (base + pf_code_framesize(orig) != tstate->datastack_top || frame->frame_obj != NULL ||
        frame->stacktop != orig->co_nlocalsplus ||
        pf_code_framesize(code) > tstate->datastack_limit - base) {
        return 0;
    }
    tstate->datastack_top = base + pf_code_framesize(code);
    for (int i = orig->co_nlocalsplus; i < code->co_nlocalsplus; i++) {
        frame->localsplus[i] = NULL;
    }
    frame->f_code = (PyCodeObject *)Py_NewRef(code);
    frame->stacktop = code->co_nlocalsplus;
    frame->prev_instr = _PyCode_CODE(code) - 1;
    return 1;
}

/* Run entry `e` for `frame`: in the frame itself when its code can take it over, else in a
   shadow frame. `exports` and `stale` as for pf_eval_shadow. */
static PyObject *
pf_eval_entry(PyThreadState *tstate, _PyInterpreterFrame *frame, PfEntry *e, PyObject *exports,
              PyObject *stale)
{
    PyCodeObject *orig = frame->f_code;
    if (!e->takes_over || !pf_frame_take_over(tstate, frame, e->code)) {
        return pf_eval_shadow(tstate, frame, e, exports, stale);
    }
    if (e->exports_slot >= 0) {
        frame->localsplus[e->exports_slot] = exports;
    } else {
        Py_XDECREF(exports);
    }
    Py_XDECREF(stale);
    /* The frame's reference to the original code, kept until the new code is done: the code
       owns the co_extra slot that holds `e`. */
    PyObject *result = _PyEval_EvalFrameDefault(tstate, frame, 0);
    Py_DECREF(orig);
    return result;
}

/* A miss with a callable callback: ask it what to do with this frame. */
static PyObject *
pf_eval_miss(PyThreadState *tstate, _PyInterpreterFrame *frame, PyObject *callback)
{
    PyCodeObject *code = frame->f_code;
    PyObject *info = pf_frameinfo_new(frame);
    if (info == NULL) {
        return NULL;
    }
    pf_tls_callback = NULL;  /* `callback` holds the slot's reference meanwhile */
    int stepped_aside = pf_step_aside(tstate->interp);
    PyObject *result = PyObject_CallOneArg(callback, info);
    pf_step_back(tstate->interp, stepped_aside);
    pf_frameinfo_detach(info);
    Py_DECREF(info);
    Py_XDECREF(pf_callback_return(callback));
    if (result == NULL) {
        return NULL;  /* the frame is not run; _PyEval_Vector still clears and pops it */
    }

    if (result == Py_None) {
        Py_DECREF(result);
        return pf_eval_previous(pf_prev_eval, tstate, frame, 0);
    }
    if (result == pf_SKIP || result == pf_RUN_ONLY) {
        PfExtraState *state = pf_code_ensure_extra(code);
        int new_state = result == pf_SKIP ? PF_STATE_SKIP : PF_STATE_RUN_ONLY;
        Py_DECREF(result);
        if (state == NULL) {
            return NULL;
        }
        state->state = new_state;
        return pf_eval_previous(pf_prev_eval, tstate, frame, 0);
    }
    if (PyTuple_Check(result) && PyTuple_GET_SIZE(result) == 3) {
        PfEntry *e = NULL;
        PfExtraState *state = pf_code_ensure_extra(code);
        if (state != NULL) {
            e = pf_cache_add(state, code, PyTuple_GET_ITEM(result, 0),
                             PyTuple_GET_ITEM(result, 1), PyTuple_GET_ITEM(result, 2), callback);
        }
        Py_DECREF(result);
        if (e == NULL) {
            return NULL;
        }
        /* Installed without re-checking its guards (the callback built them from this frame)
           unless they export values to the new code: then checking them fetches those. Should
           that check fail, the frame runs as it is, never wrongly. Not a hit: `hits` counts
           cached calls whose guards passed. */
        if (pf_guards_export_count(e->root) == 0) {
            return pf_eval_entry(tstate, frame, e, NULL, NULL);
        }
        PyObject *exports = NULL;
        pf_tls_callback = NULL;  /* as on a lookup: guards never call back into pyframe */
        int ok = pf_cache_check_entry(state, e, frame->localsplus, code->co_nlocalsplus,
                                      frame->f_globals, frame->f_builtins,
                                      frame->f_func->func_closure, &exports);
        PyObject *stale = pf_callback_return(callback);
        if (!ok) {
            Py_XDECREF(stale);
            return pf_eval_previous(pf_prev_eval, tstate, frame, 0);
        }
        return pf_eval_entry(tstate, frame, e, exports, stale);
    }
    PyErr_Format(PyExc_TypeError,
                 "pyframe: the frame callback must return None, SKIP, RUN_ONLY or a tuple "
                 "(code, guards, info), not %.100s",
                 Py_TYPE(result)->tp_name);
    Py_DECREF(result);
    return NULL;
}

/* The PEP 523 hook. */
static PyObject *
pf_eval_frame(PyThreadState *tstate, _PyInterpreterFrame *frame, int throwflag)
{
    if (PF_UNLIKELY(pf_tls_delegating == frame)) {
        /* A frame this thread is handing down the chain came back to us (a hook installed
           after ours, while ours was on top, chains to ours again): it was decided on already
           (its callback asked once), so CPython runs it, as pf_eval_previous would. */
        return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
    }
    PyObject *callback = pf_tls_callback;
    if (callback == NULL) {
        _PyFrameEvalFunction prev = pf_prev_eval;
        if (PF_UNLIKELY(pf_active_threads == 0)) {
            /* Left installed with no thread using it (a hook installed after ours put us back
               when it left): step aside so CPython can inline calls again. */
            pf_hook_uninstall(tstate->interp);
        }
        return pf_eval_previous(prev, tstate, frame, throwflag);
    }
    PyCodeObject *code = frame->f_code;
    if (throwflag || frame->owner != FRAME_OWNED_BY_THREAD ||
        (code->co_flags & PF_GENERATOR_FLAGS)) {
        return pf_eval_previous(pf_prev_eval, tstate, frame, throwflag);
    }
    PfExtraState *state = pf_code_get_extra(code);
    if (state != NULL) {
        if (state->state == PF_STATE_SKIP) {
            return pf_eval_previous(pf_prev_eval, tstate, frame, 0);
        }
        if (state->entries != NULL) {
            pf_tls_callback = NULL;  /* guards never call back into pyframe */
            PyObject *closure = frame->f_func->func_closure;
            /* Entries are their compiler's (backend's); run-only mode (False) uses any. */
            PyObject *exports = NULL;
            PfEntry *e = pf_cache_lookup(state, frame->localsplus, code->co_nlocalsplus,
                                         frame->f_globals, frame->f_builtins, closure,
                                         callback == Py_False ? NULL : callback, &exports);
            PyObject *stale = pf_callback_return(callback);
            if (e != NULL) {
                return pf_eval_entry(tstate, frame, e, exports, stale);
            }
            Py_XDECREF(stale);
        }
        if (state->state == PF_STATE_RUN_ONLY) {
            return pf_eval_previous(pf_prev_eval, tstate, frame, 0);
        }
    }
    if (callback == Py_False) {
        return pf_eval_previous(pf_prev_eval, tstate, frame, 0);
    }
    return pf_eval_miss(tstate, frame, callback);
}

/* ---- set_eval_frame ------------------------------------------------------------------------ */

/* None -> NULL, False -> Py_False, callable -> itself; new reference (or NULL). -1 on error. */
static int
pf_callback_from_object(PyObject *obj, PyObject **out)
{
    if (obj == Py_None) {
        *out = NULL;
        return 0;
    }
    if (obj == Py_False || PyCallable_Check(obj)) {
        *out = Py_NewRef(obj);
        return 0;
    }
    PyErr_Format(PyExc_TypeError,
                 "pyframe: a frame callback must be None, False or callable, not %.100s",
                 Py_TYPE(obj)->tp_name);
    return -1;
}

static PyObject *
pf_set_eval_frame(PyObject *Py_UNUSED(module), PyObject *arg)
{
    PyObject *callback;
    if (pf_callback_from_object(arg, &callback) < 0) {
        return NULL;
    }
    PyObject *old = pf_callback_exchange(callback);
    return old != NULL ? old : Py_NewRef(Py_None);
}

PyObject *
pf_hook_state(void)
{
    PyInterpreterState *interp = PyThreadState_GET()->interp;
    return Py_BuildValue("{s:O,s:i,s:O}", "installed",
                         _PyInterpreterState_GetEvalFrameFunc(interp) == pf_eval_frame ? Py_True
                                                                                       : Py_False,
                         "active_threads", pf_active_threads, "chained",
                         pf_prev_eval != NULL ? Py_True : Py_False);
}

static PyObject *
pf_hook_state_py(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(args))
{
    return pf_hook_state();
}

static PyObject *
pf_shadow_frames_py(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(args))
{
    return PyLong_FromUnsignedLongLong(pf_shadow_frames);
}

/* ---- stances ------------------------------------------------------------------------------ */

/* What a region's entry does (pyframe.set_stance, torch.compiler.set_stance; decorators.py). Only
   force_eager changes anything here: the region runs with the callback off, cached entries
   included. The other stances act on a miss, in the callback (convert_frame.py reads
   `_C.stance()`). Like torch._dynamo's, the stance is read when a region is entered, never inside. */
#define PF_STANCE_FORCE_EAGER 1

static int pf_own_stance = 0;                   /* pyframe.set_stance's; 0: default (follow torch's) */
static PyObject *pf_stance_classify = NULL;     /* strong: torch's stance object -> int (Python) */
static PyObject *pf_torch_stance_module = NULL; /* "torch._dynamo.eval_frame", interned */
static PyObject *pf_torch_stance_name = NULL;   /* "_stance", interned */
static PyObject *pf_torch_stance_dict = NULL;   /* strong: that module's dict, once it is loaded */
static PyObject *pf_torch_stance_seen = NULL;   /* strong: the stance object classified last */
static int pf_torch_stance = 0;
/* The versions of sys.modules (while torch's module is not loaded) and of that module's dict when
   last read: while unchanged, nothing is looked up (one load and compare per region entry). */
static unsigned long long pf_modules_version = 0;
static unsigned long long pf_torch_stance_version = 0;

/* The stance in force: pyframe's own when set, else torch.compiler's (torch._dynamo.eval_frame's
   `_stance`, replaced by a new object at each set_stance: classified once per object). -1 with an
   exception set on failure. While neither dict changed since the last read, one version compare. */
static int
pf_current_stance(void)
{
    if (pf_own_stance != 0 || pf_stance_classify == NULL) {
        return pf_own_stance;
    }
    if (pf_torch_stance_dict == NULL) {
        PyObject *modules = PyImport_GetModuleDict();
        if (pf_modules_version != 0 && pf_dict_version(modules) == pf_modules_version) {
            return 0;  /* no import since the last look */
        }
        PyObject *mod = PyDict_GetItemWithError(modules, pf_torch_stance_module);
        if (mod == NULL || !PyModule_Check(mod)) {
            pf_modules_version = PyErr_Occurred() ? 0 : pf_dict_version(modules);
            return PyErr_Occurred() ? -1 : 0;  /* not loaded: no stance was ever set */
        }
        pf_torch_stance_dict = Py_NewRef(PyModule_GetDict(mod));
    }
    if (pf_torch_stance_version != 0 && pf_dict_version(pf_torch_stance_dict) == pf_torch_stance_version) {
        return pf_torch_stance;  /* no global of that module assigned since */
    }
    PyObject *stance = PyDict_GetItemWithError(pf_torch_stance_dict, pf_torch_stance_name);
    if (stance == NULL) {
        return PyErr_Occurred() ? -1 : 0;  /* (the module is still being imported) */
    }
    if (stance != pf_torch_stance_seen) {
        PyObject *code = PyObject_CallOneArg(pf_stance_classify, stance);
        if (code == NULL) {
            return -1;
        }
        long value = PyLong_AsLong(code);
        Py_DECREF(code);
        if (value == -1 && PyErr_Occurred()) {
            return -1;
        }
        Py_XSETREF(pf_torch_stance_seen, Py_NewRef(stance));
        pf_torch_stance = (int)value;
    }
    pf_torch_stance_version = pf_dict_version(pf_torch_stance_dict);
    return pf_torch_stance;
}

static PyObject *
pf_set_stance_py(PyObject *Py_UNUSED(module), PyObject *arg)
{
    long value = PyLong_AsLong(arg);
    if (value == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (value < 0) {
        PyErr_SetString(PyExc_ValueError, "set_stance() takes a stance code >= 0");
        return NULL;
    }
    int previous = pf_own_stance;
    pf_own_stance = (int)value;
    return PyLong_FromLong(previous);
}

static PyObject *
pf_stance_py(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(args))
{
    int stance = pf_current_stance();
    return stance < 0 ? NULL : PyLong_FromLong(stance);
}

static PyObject *
pf_watch_torch_stance_py(PyObject *Py_UNUSED(module), PyObject *classify)
{
    if (!PyCallable_Check(classify)) {
        PyErr_SetString(PyExc_TypeError, "watch_torch_stance() takes a callable");
        return NULL;
    }
    if (pf_torch_stance_module == NULL) {
        pf_torch_stance_module = PyUnicode_InternFromString("torch._dynamo.eval_frame");
        pf_torch_stance_name = PyUnicode_InternFromString("_stance");
        if (pf_torch_stance_module == NULL || pf_torch_stance_name == NULL) {
            return NULL;
        }
    }
    Py_XSETREF(pf_stance_classify, Py_NewRef(classify));
    Py_CLEAR(pf_torch_stance_seen);  /* classified again by the new function */
    pf_torch_stance_version = 0;
    Py_RETURN_NONE;
}

static PyObject *
pf_get_eval_frame_py(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(args))
{
    return Py_NewRef(pf_tls_callback != NULL ? pf_tls_callback : Py_None);
}

/* ---- CallbackScope ------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *fn;
    PyObject *callback;  /* NULL for None */
    PyObject *dict;
    PyObject *weakreflist;
    vectorcallfunc vectorcall;
} PfCallbackScope;

static PyObject *
pf_scope_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PfCallbackScope *self = (PfCallbackScope *)obj;
    PyObject *callback = self->callback;
    if (pf_tls_callback == callback) {
        if (callback != NULL) {
            pf_hook_install(PyThreadState_GET()->interp);  /* see pf_callback_exchange */
        }
        return PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    }
    if (callback != NULL) {
        int stance = pf_current_stance();
        if (PF_UNLIKELY(stance < 0)) {
            return NULL;
        }
        if (PF_UNLIKELY(stance == PF_STANCE_FORCE_EAGER)) {
            callback = NULL;  /* the region runs as Python, as under torch.compile's force_eager */
        }
    }
    if (callback == NULL) {
        /* Off for one call made inside a region (a compiled graph, pyframe.disable): clear the
           slot without touching the counts, as the hook does around guards. The hook stays
           installed and lets this thread's frames run as they are; installing and removing it
           on every graph call would cost more than the graph call itself. `fn` is held for the
           call: a graph's first-call check replaces itself (`scope.fn = ...`) while it runs. */
        PyObject *old = pf_tls_callback;
        pf_tls_callback = NULL;
        PyObject *fn = Py_NewRef(self->fn);
        PyObject *result = PyObject_Vectorcall(fn, args, nargsf, kwnames);
        Py_DECREF(fn);
        Py_XDECREF(pf_callback_return(old));
        return result;
    }
    Py_XINCREF(callback);
    PyObject *old = pf_callback_exchange(callback);
    PyObject *result = PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    /* Restore even when fn raised; what we get back is normally our own `callback`. */
    Py_XDECREF(pf_callback_exchange(old));
    return result;
}

static PyObject *
pf_scope_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"fn", "callback", NULL};
    PyObject *fn, *callback_arg;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:CallbackScope", kwlist, &fn,
                                     &callback_arg)) {
        return NULL;
    }
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "CallbackScope: fn must be callable, not %.100s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    PyObject *callback;
    if (pf_callback_from_object(callback_arg, &callback) < 0) {
        return NULL;
    }
    PfCallbackScope *self = (PfCallbackScope *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_XDECREF(callback);
        return NULL;
    }
    self->fn = Py_NewRef(fn);
    self->callback = callback;
    self->dict = NULL;
    self->weakreflist = NULL;
    self->vectorcall = pf_scope_vectorcall;
    return (PyObject *)self;
}

static int
pf_scope_traverse(PfCallbackScope *self, visitproc visit, void *arg)
{
    Py_VISIT(self->fn);
    Py_VISIT(self->callback);
    Py_VISIT(self->dict);
    return 0;
}

static int
pf_scope_clear(PfCallbackScope *self)
{
    Py_CLEAR(self->fn);
    Py_CLEAR(self->callback);
    Py_CLEAR(self->dict);
    return 0;
}

static void
pf_scope_dealloc(PfCallbackScope *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    pf_scope_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Used as a method: bind like a function. Calls through LOAD_METHOD skip this altogether thanks
   to Py_TPFLAGS_METHOD_DESCRIPTOR and pass the instance as the first argument. */
static PyObject *
pf_scope_descr_get(PyObject *self, PyObject *obj, PyObject *Py_UNUSED(type))
{
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, obj);
}

static PyObject *
pf_scope_get_callback(PfCallbackScope *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->callback != NULL ? self->callback : Py_None);
}

static int
pf_scope_set_fn(PfCallbackScope *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value == NULL || !PyCallable_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "CallbackScope.fn must be a callable");
        return -1;
    }
    Py_SETREF(self->fn, Py_NewRef(value));
    return 0;
}

static PyObject *
pf_scope_get_fn(PfCallbackScope *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->fn);
}

static PyObject *
pf_scope_repr(PfCallbackScope *self)
{
    return PyUnicode_FromFormat("<pyframe._C.CallbackScope fn=%R callback=%R>", self->fn,
                                self->callback != NULL ? self->callback : Py_None);
}

static PyGetSetDef pf_scope_getset[] = {
    {"fn", (getter)pf_scope_get_fn, (setter)pf_scope_set_fn,
     "the wrapped callable (replaceable: a compiled graph's first-call check swaps itself out)", NULL},
    {"callback", (getter)pf_scope_get_callback, NULL,
     "the thread callback installed around each call (None, False or a callable)", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL},
};

static PyTypeObject PfCallbackScope_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyframe._C.CallbackScope",
    .tp_basicsize = sizeof(PfCallbackScope),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "CallbackScope(fn, callback): calling it sets this thread's frame callback to "
              "`callback`, calls fn, and restores the previous callback (also on error).",
    .tp_new = pf_scope_new,
    .tp_dealloc = (destructor)pf_scope_dealloc,
    .tp_traverse = (traverseproc)pf_scope_traverse,
    .tp_clear = (inquiry)pf_scope_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(PfCallbackScope, vectorcall),
    .tp_descr_get = pf_scope_descr_get,
    .tp_dictoffset = offsetof(PfCallbackScope, dict),
    .tp_weaklistoffset = offsetof(PfCallbackScope, weakreflist),
    .tp_repr = (reprfunc)pf_scope_repr,
    .tp_getset = pf_scope_getset,
};

/* ---- class versions ------------------------------------------------------------------------ */

/* class_version(cls): an int that changes whenever an attribute of `cls`, of a class of its MRO
   or of its metaclass (and the metaclass's MRO) is set or deleted, or its bases change: the
   version tags of cls and type(cls) (PyType_Modified clears a type's tag and its subclasses'),
   side by side. 0 when a tag cannot be assigned (then nothing may be remembered about it). The
   translator keeps what it read of a class while this stays the same (variables/base.py). */
static PyObject *
pf_class_version(PyObject *self, PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "class_version() takes a class");
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)cls, *meta = Py_TYPE(cls);
    if (!pf_type_assign_version_tag(tp) || !pf_type_assign_version_tag(meta)) {
        return PyLong_FromLong(0);
    }
    return PyLong_FromUnsignedLongLong(((unsigned long long)tp->tp_version_tag << 32) | meta->tp_version_tag);
}

/* ---- module init --------------------------------------------------------------------------- */

static PyMethodDef pf_methods[] = {
    {"class_version", pf_class_version, METH_O,
     "class_version(cls) -> int\n\nChanges whenever cls, a class of its MRO or its metaclass is "
     "modified (their version tags); 0 if a tag cannot be assigned."},
    {"set_eval_frame", pf_set_eval_frame, METH_O,
     "set_eval_frame(callback) -> previous\n\nSet this thread's frame callback: None (off), "
     "False (run cached entries only) or a callable (called with a FrameInfo on a miss)."},
    {"set_stance", pf_set_stance_py, METH_O,
     "set_stance(code) -> previous\n\npyframe's own stance (0: default, following "
     "torch.compiler's; 1: force_eager; other codes are read by the miss path)."},
    {"stance", pf_stance_py, METH_NOARGS,
     "stance() -> int\n\nThe stance regions entered now follow: pyframe's own when set, else "
     "torch.compiler's as watch_torch_stance's function classifies it."},
    {"watch_torch_stance", pf_watch_torch_stance_py, METH_O,
     "watch_torch_stance(classify)\n\nFollow torch._dynamo.eval_frame._stance once it is loaded: "
     "classify(stance) -> code, called once per stance object."},
    {"get_eval_frame", pf_get_eval_frame_py, METH_NOARGS,
     "get_eval_frame() -> callback\n\nThis thread's frame callback: None, False or a callable."},
    {"_hook_state", pf_hook_state_py, METH_NOARGS,
     "Debugging: {'installed': is our hook the interpreter's, 'active_threads': n, "
     "'chained': do we chain to another hook}."},
    {"_shadow_frames", pf_shadow_frames_py, METH_NOARGS,
     "Debugging: how many cached calls ran their code in a shadow frame (all threads), not in "
     "the frame itself."},
    {NULL},
};

static PyObject *
pf_sentinel_new(const char *name)
{
    PfSentinel *s = PyObject_New(PfSentinel, &PfSentinel_Type);
    if (s != NULL) {
        s->name = name;
    }
    return (PyObject *)s;
}

int
pf_eval_frame_init(PyObject *module)
{
    if (pf_extra_index < 0) {
        pf_extra_index = _PyEval_RequestCodeExtraIndex(pf_extra_state_free);
        if (pf_extra_index < 0) {
            PyErr_SetString(PyExc_ImportError, "pyframe: no free co_extra index left");
            return -1;
        }
    }
    if (PyType_Ready(&PfSentinel_Type) < 0 || PyType_Ready(&PfFrameInfo_Type) < 0 ||
        PyType_Ready(&PfCallbackScope_Type) < 0) {
        return -1;
    }
    if (pf_SKIP == NULL) {
        pf_SKIP = pf_sentinel_new("SKIP");
        pf_RUN_ONLY = pf_sentinel_new("RUN_ONLY");
        if (pf_SKIP == NULL || pf_RUN_ONLY == NULL) {
            return -1;
        }
    }
    if (PyModule_AddObjectRef(module, "SKIP", pf_SKIP) < 0 ||
        PyModule_AddObjectRef(module, "RUN_ONLY", pf_RUN_ONLY) < 0 ||
        PyModule_AddObjectRef(module, "FrameInfo", (PyObject *)&PfFrameInfo_Type) < 0 ||
        PyModule_AddObjectRef(module, "CallbackScope", (PyObject *)&PfCallbackScope_Type) < 0) {
        return -1;
    }
    return PyModule_AddFunctions(module, pf_methods);
}

#else
/* The hook reads 3.11's _PyInterpreterFrame and eval-function signature throughout. */
#error "pyframe's C layer supports CPython 3.11 only (see csrc/eval_frame.c)"
#endif
