// guards.cpp - compiled guard trees (docs/c_layer.md section 5).
//
// A RootGuardManager is a tree of GuardManager nodes. Each node fetches one value (a fast local,
// a global, a builtin, a closure cell, or an attribute/item of its parent's value) once, runs its
// leaf checks in the order they were added, then its children. Any exception while fetching or
// checking means "fails" and is cleared.
//
// The hook calls pf_guards_check_frame() on every cached call with the frame's raw localsplus,
// so nothing here goes through pybind11 on that path: leaves hold raw pointers (kept alive by
// py::object members) and use the CPython API directly. TENSOR_MATCH knows nothing of libtorch:
// it reads a tensor's metadata through the getset descriptors and method the tensor type
// exposes to Python, resolved once when the guard is built and called through their C function
// pointers on every check.
#include "pyframe.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace pyframe {
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

std::string repr_of(py::handle obj) {
    return py::repr(obj).cast<std::string>();
}

std::string qualname_of(py::handle tp) {
    if (py::hasattr(tp, "__qualname__")) {
        return py::str(tp.attr("__qualname__")).cast<std::string>();
    }
    return repr_of(tp);
}

// ---- leaf checks ------------------------------------------------------------------------------

class Leaf {
public:
    explicit Leaf(std::string text) : text_(std::move(text)) {}
    virtual ~Leaf() = default;
    // true: passes; false: fails (a Python error may be left set; the tree clears it).
    virtual bool check(PyObject *value) = 0;
    const std::string &text() const { return text_; }

private:
    std::string text_;
};

class TypeMatch final : public Leaf {
public:
    TypeMatch(py::object tp, std::string text) : Leaf(std::move(text)), tp_(std::move(tp)) {}
    bool check(PyObject *v) override { return (PyObject *)Py_TYPE(v) == tp_.ptr(); }

private:
    py::object tp_;
};

class IdMatch final : public Leaf {
public:
    IdMatch(py::object obj, std::string text) : Leaf(std::move(text)), raw_(obj.ptr()) {
        // A weak reference when possible, so the guard does not keep e.g. a module alive and
        // fails once the object died (its id may be reused by another object).
        PyObject *ref = PyWeakref_NewRef(obj.ptr(), nullptr);
        if (ref != nullptr) {
            ref_ = py::reinterpret_steal<py::object>(ref);
            weak_ = true;
        } else {
            PyErr_Clear();
            ref_ = std::move(obj);
        }
    }
    bool check(PyObject *v) override {
        return v == raw_ && (!weak_ || PyWeakref_GET_OBJECT(ref_.ptr()) == raw_);
    }

private:
    PyObject *raw_;
    py::object ref_;
    bool weak_ = false;
};

class EqualsMatch final : public Leaf {
public:
    EqualsMatch(py::object value, std::string text)
        : Leaf(std::move(text)), value_(std::move(value)) {}
    bool check(PyObject *v) override {
        PyObject *expected = value_.ptr();
        if (Py_TYPE(v) != Py_TYPE(expected)) {
            return false;
        }
        return v == expected || PyObject_RichCompareBool(v, expected, Py_EQ) == 1;
    }

private:
    py::object value_;
};

class NoneMatch final : public Leaf {
public:
    NoneMatch(bool want_none, std::string text) : Leaf(std::move(text)), want_none_(want_none) {}
    bool check(PyObject *v) override { return (v == Py_None) == want_none_; }

private:
    bool want_none_;
};

class LenMatch final : public Leaf {
public:
    LenMatch(Py_ssize_t n, std::string text) : Leaf(std::move(text)), n_(n) {}
    bool check(PyObject *v) override {
        if (PyList_CheckExact(v)) {
            return PyList_GET_SIZE(v) == n_;
        }
        if (PyTuple_CheckExact(v)) {
            return PyTuple_GET_SIZE(v) == n_;
        }
        return PyObject_Size(v) == n_;
    }

private:
    Py_ssize_t n_;
};

class DictKeysMatch final : public Leaf {
public:
    DictKeysMatch(py::tuple keys, std::string text)
        : Leaf(std::move(text)), keys_(std::move(keys)) {}
    bool check(PyObject *v) override {
        if (!PyDict_Check(v) || PyDict_GET_SIZE(v) != PyTuple_GET_SIZE(keys_.ptr())) {
            return false;
        }
        Py_ssize_t pos = 0, i = 0;
        PyObject *key, *value;
        while (PyDict_Next(v, &pos, &key, &value)) {
            PyObject *expected = PyTuple_GET_ITEM(keys_.ptr(), i++);
            if (key == expected) {
                continue;
            }
            Py_INCREF(key);  // a Python __eq__ may mutate the dict under us
            int eq = PyObject_RichCompareBool(key, expected, Py_EQ);
            Py_DECREF(key);
            if (eq != 1 || PyDict_GET_SIZE(v) != PyTuple_GET_SIZE(keys_.ptr())) {
                return false;
            }
        }
        return true;
    }

private:
    py::tuple keys_;
};

// fn() == expected, for global state (torch.is_grad_enabled, torch.get_default_dtype).
class CallMatch final : public Leaf {
public:
    CallMatch(py::object fn, py::object expected, std::string text)
        : Leaf(std::move(text)), fn_(std::move(fn)), expected_(std::move(expected)) {}
    bool check(PyObject *) override {
        PyObject *r = PyObject_Vectorcall(fn_.ptr(), nullptr, 0, nullptr);
        if (r == nullptr) {
            return false;
        }
        bool ok = r == expected_.ptr() || PyObject_RichCompareBool(r, expected_.ptr(), Py_EQ) == 1;
        Py_DECREF(r);
        return ok;
    }

private:
    py::object fn_, expected_;
};

// ---- TENSOR_MATCH -----------------------------------------------------------------------------

// One attribute read, either through the getset descriptor's C getter found on the type (fast),
// or by plain getattr with an interned name (fallback: the descriptor is not a C getset, or the
// type was modified since).
struct AttrReader {
    getter get = nullptr;
    void *closure = nullptr;
    py::object name;

    void resolve(PyTypeObject *tp, const char *attr) {
        name = py::reinterpret_steal<py::object>(PyUnicode_InternFromString(attr));
        if (!name) {
            throw py::error_already_set();
        }
        PyObject *descr = _PyType_Lookup(tp, name.ptr());  // borrowed
        if (descr != nullptr && Py_TYPE(descr) == &PyGetSetDescr_Type) {
            PyGetSetDef *def = ((PyGetSetDescrObject *)descr)->d_getset;
            get = def->get;
            closure = def->closure;
        }
    }
    PyObject *read(PyObject *v, bool fast) const {
        return (fast && get != nullptr) ? get(v, closure) : PyObject_GetAttr(v, name.ptr());
    }
};

// A no-argument method call through the method descriptor's C function (tensor.stride()).
// Unlike getattr, this ignores an instance attribute shadowing the method (methods are non-data
// descriptors); tensors with an instance attribute named `stride`/`is_contiguous` are not worth
// a dict lookup per check.
struct MethodCaller {
    PyMethodDef *def = nullptr;
    py::object name;
    py::object empty_tuple;

    void resolve(PyTypeObject *tp, const char *attr) {
        name = py::reinterpret_steal<py::object>(PyUnicode_InternFromString(attr));
        if (!name) {
            throw py::error_already_set();
        }
        empty_tuple = py::tuple();
        PyObject *descr = _PyType_Lookup(tp, name.ptr());
        if (descr != nullptr && Py_TYPE(descr) == &PyMethodDescr_Type) {
            def = ((PyMethodDescrObject *)descr)->d_method;
        }
    }
    PyObject *call(PyObject *v, bool fast) const {
        if (fast && def != nullptr) {
            int kind = def->ml_flags & (METH_VARARGS | METH_FASTCALL | METH_NOARGS | METH_O |
                                        METH_KEYWORDS | METH_METHOD);
            PyCFunction meth = def->ml_meth;
            switch (kind) {
                case METH_NOARGS:
                    return meth(v, nullptr);
                case METH_VARARGS:
                    return meth(v, empty_tuple.ptr());
                case METH_VARARGS | METH_KEYWORDS:
                    return ((PyCFunctionWithKeywords)(void (*)(void))meth)(v, empty_tuple.ptr(),
                                                                           nullptr);
                case METH_FASTCALL:
                    return ((_PyCFunctionFast)(void (*)(void))meth)(v, nullptr, 0);
                case METH_FASTCALL | METH_KEYWORDS:
                    return ((_PyCFunctionFastWithKeywords)(void (*)(void))meth)(v, nullptr, 0,
                                                                                nullptr);
                default:
                    break;
            }
        }
        return PyObject_CallMethodNoArgs(v, name.ptr());
    }
};

// Is `seq` a tuple of ints equal to `expected`? (torch.Size and stride() results are tuples.)
bool int_tuple_equals(PyObject *seq, const std::vector<int64_t> &expected) {
    if (!PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != (Py_ssize_t)expected.size()) {
        return false;
    }
    for (size_t i = 0; i < expected.size(); i++) {
        PyObject *item = PyTuple_GET_ITEM(seq, i);
        if (!PyLong_Check(item)) {
            return false;
        }
        long long x = PyLong_AsLongLong(item);
        if (x != expected[i] || (x == -1 && PyErr_Occurred())) {
            return false;
        }
    }
    return true;
}

// type(v) is tp, then dtype (identity), device (the `is_cpu` getter for a plain CPU device,
// else v.device == device), requires_grad, shape, and strides (`is_contiguous()` when that is
// equivalent, else `stride()`), cheapest and most selective first. Each read is one C call into
// torch's getter; torch's own error/warning/torch-function handling inside each getter is the
// floor (about 30 ns per read on the reference machine), not anything done here.
class TensorMatch final : public Leaf {
public:
    TensorMatch(py::object tp, py::object dtype, py::object device, std::vector<int64_t> sizes,
                std::vector<int64_t> strides, bool requires_grad, std::string text)
        : Leaf(std::move(text)),
          tp_obj_(std::move(tp)),
          dtype_(std::move(dtype)),
          device_(std::move(device)),
          sizes_(std::move(sizes)),
          strides_(std::move(strides)),
          requires_grad_(requires_grad) {
        if (!PyType_Check(tp_obj_.ptr())) {
            throw py::type_error("add_tensor_match: tp must be a type");
        }
        tp_ = (PyTypeObject *)tp_obj_.ptr();
        // A CPU device without an index: the cheap boolean getter `is_cpu` decides, no
        // torch.device object is built per check.
        if (py::hasattr(device_, "type") && py::hasattr(device_, "index")) {
            device_is_cpu_ = py::str(device_.attr("type")).cast<std::string>() == "cpu" &&
                             device_.attr("index").is_none();
        }
        // With every size >= 2, is_contiguous() holds exactly when the strides are the
        // row-major ones (size-1 and size-0 dims are where it is lenient), and it costs one
        // bool instead of building a tuple.
        use_contiguity_ = strides_ == contiguous_strides(sizes_);
        for (int64_t s : sizes_) {
            use_contiguity_ = use_contiguity_ && s >= 2;
        }
        is_contiguous_call_.resolve(tp_, "is_contiguous");
        dtype_get_.resolve(tp_, "dtype");
        is_cpu_get_.resolve(tp_, "is_cpu");
        device_get_.resolve(tp_, "device");
        requires_grad_get_.resolve(tp_, "requires_grad");
        shape_get_.resolve(tp_, "shape");
        stride_call_.resolve(tp_, "stride");
        // The resolved descriptors stay right while the type (and its bases) are unchanged:
        // CPython bumps tp_version_tag on any change. Attribute lookup must also be the
        // generic one (no __getattr__/__getattribute__ in Python).
        if (PyType_HasFeature(tp_, Py_TPFLAGS_VALID_VERSION_TAG) &&
            tp_->tp_getattro == PyObject_GenericGetAttr) {
            version_tag_ = tp_->tp_version_tag;
        }
    }

    bool check(PyObject *v) override {
        if (Py_TYPE(v) != tp_) {
            return false;  // not a tensor (or another subclass): fail before any attribute read
        }
        const bool fast = version_tag_ != 0 && tp_->tp_version_tag == version_tag_;

        PyObject *r = dtype_get_.read(v, fast);
        if (r == nullptr) {
            return false;
        }
        bool ok = r == dtype_.ptr();  // dtypes are singletons
        Py_DECREF(r);
        if (!ok) {
            return false;
        }

        if (device_is_cpu_) {
            r = is_cpu_get_.read(v, fast);
            if (r == nullptr) {
                return false;
            }
            ok = r == Py_True;
        } else {
            r = device_get_.read(v, fast);
            if (r == nullptr) {
                return false;
            }
            ok = PyObject_RichCompareBool(r, device_.ptr(), Py_EQ) == 1;
        }
        Py_DECREF(r);
        if (!ok) {
            return false;
        }

        r = requires_grad_get_.read(v, fast);
        if (r == nullptr) {
            return false;
        }
        ok = r == (requires_grad_ ? Py_True : Py_False);
        Py_DECREF(r);
        if (!ok) {
            return false;
        }

        r = shape_get_.read(v, fast);
        if (r == nullptr) {
            return false;
        }
        ok = int_tuple_equals(r, sizes_);
        Py_DECREF(r);
        if (!ok) {
            return false;
        }

        if (use_contiguity_) {
            r = is_contiguous_call_.call(v, fast);
            if (r == nullptr) {
                return false;
            }
            ok = r == Py_True;
        } else {
            r = stride_call_.call(v, fast);
            if (r == nullptr) {
                return false;
            }
            ok = int_tuple_equals(r, strides_);
        }
        Py_DECREF(r);
        return ok;
    }

    static std::vector<int64_t> contiguous_strides(const std::vector<int64_t> &sizes) {
        std::vector<int64_t> out(sizes.size());
        int64_t z = 1;
        for (size_t i = sizes.size(); i-- > 0;) {
            out[i] = z;
            z *= sizes[i];
        }
        return out;
    }

private:
    py::object tp_obj_;
    PyTypeObject *tp_ = nullptr;
    py::object dtype_, device_;
    std::vector<int64_t> sizes_, strides_;
    bool requires_grad_;
    bool device_is_cpu_ = false;
    bool use_contiguity_ = false;
    unsigned int version_tag_ = 0;
    AttrReader dtype_get_, is_cpu_get_, device_get_, requires_grad_get_, shape_get_;
    MethodCaller stride_call_, is_contiguous_call_;
};

}  // namespace

// ---- nodes ------------------------------------------------------------------------------------

enum class Access : uint8_t { Local, Global, Builtin, Closure, Attr, Item };

class GuardManager {
public:
    GuardManager(Access access, py::object key, Py_ssize_t index, std::string source)
        : access_(access), key_(std::move(key)), index_(index), source_(std::move(source)) {}
    GuardManager(const GuardManager &) = delete;
    GuardManager &operator=(const GuardManager &) = delete;

    const std::string &source() const { return source_; }

    GuardManager *attr(const py::str &name) {
        return child(Access::Attr, name, 0, source_ + "." + name.cast<std::string>());
    }
    GuardManager *item(const py::object &key) {
        return child(Access::Item, key, 0, source_ + "[" + repr_of(key) + "]");
    }

    void add_type_match(py::object tp, std::string text) {
        if (text.empty()) {
            text = "type(" + source_ + ") is " + qualname_of(tp);
        }
        add(std::make_unique<TypeMatch>(std::move(tp), std::move(text)));
    }
    void add_id_match(py::object obj, std::string text) {
        if (text.empty()) {
            text = source_ + " is " + repr_of(obj);
        }
        add(std::make_unique<IdMatch>(std::move(obj), std::move(text)));
    }
    void add_equals_match(py::object value, std::string text) {
        if (text.empty()) {
            text = source_ + " == " + repr_of(value);
        }
        add(std::make_unique<EqualsMatch>(std::move(value), std::move(text)));
    }
    void add_none_match(std::string text) {
        add(std::make_unique<NoneMatch>(true, text.empty() ? source_ + " is None" : text));
    }
    void add_not_none_match(std::string text) {
        add(std::make_unique<NoneMatch>(false, text.empty() ? source_ + " is not None" : text));
    }
    void add_len_match(Py_ssize_t n, std::string text) {
        if (text.empty()) {
            text = "len(" + source_ + ") == " + std::to_string(n);
        }
        add(std::make_unique<LenMatch>(n, std::move(text)));
    }
    void add_dict_keys_match(py::tuple keys, std::string text) {
        if (text.empty()) {
            text = "tuple(" + source_ + ".keys()) == " + repr_of(keys);
        }
        add(std::make_unique<DictKeysMatch>(std::move(keys), std::move(text)));
    }
    void add_tensor_match(py::object tp, py::object dtype, py::object device,
                          std::vector<int64_t> sizes, std::vector<int64_t> strides,
                          bool requires_grad, std::string text) {
        if (text.empty()) {
            text = "check_tensor(" + source_ + ", " + qualname_of(tp) + ", " + repr_of(dtype) +
                   ", " + repr_of(device) + ", size=" + repr_of(py::cast(sizes)) +
                   ", stride=" + repr_of(py::cast(strides)) +
                   ", requires_grad=" + (requires_grad ? "True" : "False") + ")";
        }
        add(std::make_unique<TensorMatch>(std::move(tp), std::move(dtype), std::move(device),
                                          std::move(sizes), std::move(strides), requires_grad,
                                          std::move(text)));
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
        if (access_ == Access::Attr) {
            return PyObject_GetAttr(parent, key_.ptr());
        }
        if (PyDict_Check(parent)) {  // exact lookup: no __getitem__/__missing__ call
            PyObject *v = PyDict_GetItemWithError(parent, key_.ptr());
            Py_XINCREF(v);
            return v;
        }
        return PyObject_GetItem(parent, key_.ptr());
    }

    // Leaves first (in the order added), then children. false on the first failure.
    bool check_value(PyObject *v) const {
        for (const auto &leaf : leaves_) {
            if (!leaf->check(v)) {
                return false;
            }
        }
        for (const auto &c : children_) {
            PyObject *cv = c->fetch_from(v);
            if (cv == nullptr) {
                return false;
            }
            bool ok = c->check_value(cv);
            Py_DECREF(cv);
            if (!ok) {
                return false;
            }
        }
        return true;
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
        return find_or_add(children_, access, key, index, std::move(source));
    }

    void add(std::unique_ptr<Leaf> leaf) { leaves_.push_back(std::move(leaf)); }

    Access access_;
    py::object key_;
    Py_ssize_t index_;
    std::string source_;
    std::string unreadable_;
    std::vector<std::unique_ptr<Leaf>> leaves_;
    std::vector<std::unique_ptr<GuardManager>> children_;
};

class RootGuardManager {
public:
    RootGuardManager() = default;
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
        leaves_.push_back(
            std::make_unique<CallMatch>(std::move(fn), std::move(expected), std::move(text)));
    }

    // The hot path. Never leaves an exception set.
    bool check_frame(const FrameView &fv) const {
        bool ok = run(fv);
        if (!ok && PyErr_Occurred()) {
            PyErr_Clear();
        }
        return ok;
    }

    const std::string *first_failure(const FrameView &fv) {
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

    std::vector<std::string> texts() const {
        std::vector<std::string> out;
        for (const auto &leaf : leaves_) {
            out.push_back(leaf->text());
        }
        for (const auto &n : roots_) {
            n->collect_texts(out);
        }
        return out;
    }

private:
    bool run(const FrameView &fv) const {
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
            bool ok = n->check_value(v);
            Py_DECREF(v);
            if (!ok) {
                return false;
            }
        }
        return true;
    }

    std::vector<std::unique_ptr<Leaf>> leaves_;  // call matches (global state)
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
    py::class_<GuardManager>(m, "GuardManager",
                             "One node of a guard tree: fetches one value (once per check) and "
                             "runs its leaf checks, then its children.")
        .def_property_readonly("source", &GuardManager::source,
                               "the Python expression this node reads, e.g. L['x'].weight")
        .def("attr", &GuardManager::attr, py::arg("name"), kChild, "child node: getattr(v, name)")
        .def("item", &GuardManager::item, py::arg("key"), kChild,
             "child node: v[key] (dicts: exact lookup, no __getitem__ call)")
        .def("add_type_match", &GuardManager::add_type_match, py::arg("tp"), py::arg("text") = "")
        .def("add_id_match", &GuardManager::add_id_match, py::arg("obj"), py::arg("text") = "")
        .def("add_equals_match", &GuardManager::add_equals_match, py::arg("value"),
             py::arg("text") = "")
        .def("add_none_match", &GuardManager::add_none_match, py::arg("text") = "")
        .def("add_not_none_match", &GuardManager::add_not_none_match, py::arg("text") = "")
        .def("add_len_match", &GuardManager::add_len_match, py::arg("n"), py::arg("text") = "")
        .def("add_dict_keys_match", &GuardManager::add_dict_keys_match, py::arg("keys"),
             py::arg("text") = "")
        .def("add_tensor_match", &GuardManager::add_tensor_match, py::arg("tp"), py::arg("dtype"),
             py::arg("device"), py::arg("sizes"), py::arg("strides"), py::arg("requires_grad"),
             py::arg("text") = "")
        .def("texts", &GuardManager::texts, "every check's text below this node, in tree order")
        .def("__repr__", [](const GuardManager &g) {
            return "<pyframe._C.GuardManager " + g.source() + ">";
        });

    py::class_<RootGuardManager>(m, "RootGuardManager",
                                 "The guards of one cache entry: a tree of GuardManager nodes "
                                 "rooted at the frame's locals, globals, builtins and closure.")
        .def(py::init<>())
        .def("local", &RootGuardManager::local, py::arg("name"), py::arg("index"), kChild,
             "root node: fast local slot `index` of the original code (by name in check())")
        .def("global_", &RootGuardManager::global_, py::arg("name"), kChild,
             "root node: f_globals[name] (absent: fails)")
        .def("builtin", &RootGuardManager::builtin, py::arg("name"), kChild,
             "root node: f_builtins[name]")
        .def("closure", &RootGuardManager::closure, py::arg("index"), kChild,
             "root node: f_func.__closure__[index].cell_contents")
        .def("add_call_match", &RootGuardManager::add_call_match, py::arg("fn"),
             py::arg("expected"), py::arg("text") = "", "passes when fn() == expected")
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
        .def("texts", &RootGuardManager::texts, "every check's text, in tree order")
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

extern "C" int pf_guards_check_frame(void *root, PyObject *const *fast, int nfast,
                                     PyObject *globals, PyObject *builtins, PyObject *closure) {
    pyframe::FrameView fv;
    fv.fast = fast;
    fv.nfast = nfast;
    fv.globals = globals;
    fv.builtins = builtins;
    fv.closure = closure;
    try {
        return static_cast<pyframe::RootGuardManager *>(root)->check_frame(fv) ? 1 : 0;
    } catch (...) {
        PyErr_Clear();
        return 0;
    }
}
