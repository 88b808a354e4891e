/* ModuleCall: `module(*args, **kwargs)` without nn.Module.__call__'s Python frames when it would
 * only call forward.
 *
 * torch.nn.Module.__call__ runs two Python functions (_wrapped_call_impl, _call_impl) before
 * forward: ~0.55 us a call on this machine, more than the rest of a cache hit. When the module has
 * no hooks of its own, no global module hooks are registered, it was not compiled in place
 * (`_compiled_call_impl`) and no torch.jit trace is running, _call_impl's whole work is
 * `self.forward(*args, **kwargs)`. ModuleCall checks exactly those conditions in C and then calls
 * `type(module).forward` with the module prepended; otherwise it calls the module as usual, so
 * hooks, jit tracing and every other case keep Module.__call__'s behaviour.
 *
 * OptimizedModule wraps one in a CallbackScope: the forward frame is the one the hook compiles.
 *
 * InstanceCall is OptimizedModule's `__call__`: a method descriptor that calls the callable an
 * instance keeps in its `__dict__` (the CallbackScope above), so `opt_mod(x)` runs no Python
 * frame of pyframe's before the compiled one (a Python `__call__` cost ~0.35 us a call). While a
 * flag in a module's globals is true (torch.fx's "symbolic tracing now"), it calls a fallback.
 * Nothing here depends on the CPython version.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "pyframe.h"

typedef struct {
    PyObject_HEAD
    PyObject *module;
    PyObject *global_hooks;   /* tuple of the dicts torch.nn.modules.module keeps global hooks in */
    PyObject *tracing_state;  /* torch._C._get_tracing_state */
    vectorcallfunc vectorcall;
} PfModuleCall;

/* The instance attributes Module.__init__ sets that _call_impl reads. */
static PyObject *pf_str_hooks[4];
static PyObject *pf_str_compiled_call_impl;
static PyObject *pf_str_forward;

/* 1: forward may be called directly; 0: go through Module.__call__; -1: error. */
static int
pf_module_call_is_plain(PfModuleCall *self)
{
    PyObject **dictptr = _PyObject_GetDictPtr(self->module);
    PyObject *dict = dictptr != NULL ? *dictptr : NULL;
    if (dict == NULL) {
        return 0;
    }
    for (int i = 0; i < 4; i++) {
        PyObject *hooks = PyDict_GetItemWithError(dict, pf_str_hooks[i]);
        if (hooks == NULL || !PyDict_Check(hooks) || PyDict_GET_SIZE(hooks) != 0) {
            return PyErr_Occurred() ? -1 : 0;
        }
    }
    PyObject *compiled = PyDict_GetItemWithError(dict, pf_str_compiled_call_impl);
    if (compiled != NULL && compiled != Py_None) {
        return 0;
    }
    if (PyDict_GetItemWithError(dict, pf_str_forward) != NULL) {
        return 0;  /* a forward set on the instance: let Module.__call__ find it */
    }
    if (PyErr_Occurred()) {
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(self->global_hooks);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyDict_GET_SIZE(PyTuple_GET_ITEM(self->global_hooks, i)) != 0) {
            return 0;
        }
    }
    PyObject *tracing = PyObject_CallNoArgs(self->tracing_state);
    if (tracing == NULL) {
        return -1;
    }
    int plain = tracing == Py_None;
    Py_DECREF(tracing);
    return plain;
}

static PyObject *
pf_module_call_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PfModuleCall *self = (PfModuleCall *)obj;
    int plain = pf_module_call_is_plain(self);
    if (plain < 0) {
        return NULL;
    }
    PyObject *forward = plain ? _PyType_Lookup(Py_TYPE(self->module), pf_str_forward) : NULL;
    if (forward == NULL || !PyFunction_Check(forward)) {
        return PyObject_Vectorcall(self->module, args, nargsf, kwnames);
    }
    /* forward(module, *args, **kwargs): the module goes in front of the arguments. */
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t total = nargs + (kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[8];
    PyObject **stack = total + 1 <= 8 ? small : PyMem_Malloc((total + 1) * sizeof(PyObject *));
    if (stack == NULL) {
        return PyErr_NoMemory();
    }
    stack[0] = self->module;
    memcpy(stack + 1, args, total * sizeof(PyObject *));
    Py_INCREF(forward);  /* the type's dict could drop it while forward runs */
    PyObject *result = PyObject_Vectorcall(forward, stack, nargs + 1, kwnames);
    Py_DECREF(forward);
    if (stack != small) {
        PyMem_Free(stack);
    }
    return result;
}

static PyObject *
pf_module_call_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"module", "global_hooks", "tracing_state", NULL};
    PyObject *module, *global_hooks, *tracing_state;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!O:ModuleCall", kwlist, &module, &PyTuple_Type,
                                     &global_hooks, &tracing_state)) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(global_hooks); i++) {
        if (!PyDict_Check(PyTuple_GET_ITEM(global_hooks, i))) {
            PyErr_SetString(PyExc_TypeError, "ModuleCall: global_hooks must be a tuple of dicts");
            return NULL;
        }
    }
    if (!PyCallable_Check(module) || !PyCallable_Check(tracing_state)) {
        PyErr_SetString(PyExc_TypeError, "ModuleCall: module and tracing_state must be callable");
        return NULL;
    }
    PfModuleCall *self = (PfModuleCall *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->module = Py_NewRef(module);
    self->global_hooks = Py_NewRef(global_hooks);
    self->tracing_state = Py_NewRef(tracing_state);
    self->vectorcall = pf_module_call_vectorcall;
    return (PyObject *)self;
}

static int
pf_module_call_traverse(PfModuleCall *self, visitproc visit, void *arg)
{
    Py_VISIT(self->module);
    Py_VISIT(self->global_hooks);
    Py_VISIT(self->tracing_state);
    return 0;
}

static int
pf_module_call_clear(PfModuleCall *self)
{
    Py_CLEAR(self->module);
    Py_CLEAR(self->global_hooks);
    Py_CLEAR(self->tracing_state);
    return 0;
}

static void
pf_module_call_dealloc(PfModuleCall *self)
{
    PyObject_GC_UnTrack(self);
    pf_module_call_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
pf_module_call_repr(PfModuleCall *self)
{
    return PyUnicode_FromFormat("<pyframe._C.ModuleCall of %.100s>", Py_TYPE(self->module)->tp_name);
}

static PyMemberDef pf_module_call_members[] = {
    {"module", T_OBJECT, offsetof(PfModuleCall, module), READONLY, "the module called"},
    {NULL},
};

static PyTypeObject PfModuleCall_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyframe._C.ModuleCall",
    .tp_basicsize = sizeof(PfModuleCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "ModuleCall(module, global_hooks, tracing_state): calls module(*args, **kwargs), going "
              "straight to type(module).forward when nn.Module.__call__ would do nothing else.",
    .tp_new = pf_module_call_new,
    .tp_dealloc = (destructor)pf_module_call_dealloc,
    .tp_traverse = (traverseproc)pf_module_call_traverse,
    .tp_clear = (inquiry)pf_module_call_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(PfModuleCall, vectorcall),
    .tp_repr = (reprfunc)pf_module_call_repr,
    .tp_members = pf_module_call_members,
};

/* ---- InstanceCall ------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *name;        /* the instance-dict key of the callable called */
    PyObject *flag_dict;   /* a module's globals holding the flag */
    PyObject *flag_name;
    PyObject *fallback;    /* fallback(instance, *args, **kwargs) while the flag is true */
} PfInstanceCall;

/* desc(instance, *args, **kwargs). Py_TPFLAGS_METHOD_DESCRIPTOR lets `instance(...)` call it
 * unbound, with the instance first, instead of binding a method object on every call. It is
 * called through tp_call, not vectorcall: a call with keyword arguments then hands its kwargs dict
 * through as it came (a vectorcall would unpack it into names, and the compiled frame's **kwargs
 * pack it again). */
static PyObject *
pf_instance_call_call(PyObject *obj, PyObject *args, PyObject *kwargs)
{
    PfInstanceCall *self = (PfInstanceCall *)obj;
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    if (nargs < 1) {
        PyErr_Format(PyExc_TypeError, "%U() needs the instance as its first argument", self->name);
        return NULL;
    }
    PyObject *flag = PyDict_GetItemWithError(self->flag_dict, self->flag_name);
    if (flag == NULL && PyErr_Occurred()) {
        return NULL;
    }
    int tracing = flag != NULL ? PyObject_IsTrue(flag) : 0;
    if (tracing < 0) {
        return NULL;
    }
    PyObject *target = NULL;
    if (!tracing) {
        PyObject **dictptr = _PyObject_GetDictPtr(PyTuple_GET_ITEM(args, 0));
        PyObject *dict = dictptr != NULL ? *dictptr : NULL;
        target = dict != NULL ? PyDict_GetItemWithError(dict, self->name) : NULL;
        if (target == NULL && PyErr_Occurred()) {
            return NULL;
        }
    }
    if (target == NULL) {  /* tracing, or an instance without the callable (mid-unpickling...) */
        return PyObject_Call(self->fallback, args, kwargs);
    }
    Py_INCREF(target);  /* the instance dict could drop it while it runs */
    PyObject *result = PyObject_VectorcallDict(target, &PyTuple_GET_ITEM(args, 1), nargs - 1, kwargs);
    Py_DECREF(target);
    return result;
}

static PyObject *
pf_instance_call_get(PyObject *self, PyObject *instance, PyObject *owner)
{
    if (instance == NULL || instance == Py_None) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, instance);
}

static PyObject *
pf_instance_call_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"name", "flag_dict", "flag_name", "fallback", NULL};
    PyObject *name, *flag_dict, *flag_name, *fallback;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UO!UO:InstanceCall", kwlist, &name, &PyDict_Type,
                                     &flag_dict, &flag_name, &fallback)) {
        return NULL;
    }
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "InstanceCall: fallback must be callable");
        return NULL;
    }
    PfInstanceCall *self = (PfInstanceCall *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->name = Py_NewRef(name);
    self->flag_dict = Py_NewRef(flag_dict);
    self->flag_name = Py_NewRef(flag_name);
    self->fallback = Py_NewRef(fallback);
    return (PyObject *)self;
}

static int
pf_instance_call_traverse(PfInstanceCall *self, visitproc visit, void *arg)
{
    Py_VISIT(self->flag_dict);
    Py_VISIT(self->fallback);
    return 0;
}

static int
pf_instance_call_clear(PfInstanceCall *self)
{
    Py_CLEAR(self->name);
    Py_CLEAR(self->flag_dict);
    Py_CLEAR(self->flag_name);
    Py_CLEAR(self->fallback);
    return 0;
}

static void
pf_instance_call_dealloc(PfInstanceCall *self)
{
    PyObject_GC_UnTrack(self);
    pf_instance_call_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
pf_instance_call_repr(PfInstanceCall *self)
{
    return PyUnicode_FromFormat("<pyframe._C.InstanceCall of the instance's %R>", self->name);
}

static PyTypeObject PfInstanceCall_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyframe._C.InstanceCall",
    .tp_basicsize = sizeof(PfInstanceCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "InstanceCall(name, flag_dict, flag_name, fallback): a method calling "
              "instance.__dict__[name](*args, **kwargs), or fallback(instance, *args, **kwargs) "
              "while flag_dict[flag_name] is true.",
    .tp_new = pf_instance_call_new,
    .tp_dealloc = (destructor)pf_instance_call_dealloc,
    .tp_traverse = (traverseproc)pf_instance_call_traverse,
    .tp_clear = (inquiry)pf_instance_call_clear,
    .tp_call = pf_instance_call_call,
    .tp_descr_get = pf_instance_call_get,
    .tp_repr = (reprfunc)pf_instance_call_repr,
};


int
pf_module_call_init(PyObject *module)
{
    static const char *hooks[4] = {"_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                                   "_backward_pre_hooks"};
    for (int i = 0; i < 4; i++) {
        if (pf_str_hooks[i] == NULL && (pf_str_hooks[i] = PyUnicode_InternFromString(hooks[i])) == NULL) {
            return -1;
        }
    }
    if (pf_str_compiled_call_impl == NULL &&
        (pf_str_compiled_call_impl = PyUnicode_InternFromString("_compiled_call_impl")) == NULL) {
        return -1;
    }
    if (pf_str_forward == NULL && (pf_str_forward = PyUnicode_InternFromString("forward")) == NULL) {
        return -1;
    }
    if (PyType_Ready(&PfModuleCall_Type) < 0 || PyType_Ready(&PfInstanceCall_Type) < 0) {
        return -1;
    }
    if (PyModule_AddObjectRef(module, "InstanceCall", (PyObject *)&PfInstanceCall_Type) < 0) {
        return -1;
    }
    return PyModule_AddObjectRef(module, "ModuleCall", (PyObject *)&PfModuleCall_Type);
}
