// leaves.cpp - the leaf checks of pyframe's guard trees (docs/c_layer.md section 5).
//
// Every check() runs on the hook's hit path, so it uses the raw CPython API: identity before
// equality, exact-type tests before anything that can call Python code. TENSOR_MATCH knows
// nothing of libtorch: it reads a tensor's metadata through the getset descriptors and methods
// the tensor type exposes to Python, resolved once when the guard is built and called through
// their C function pointers on every check.
#include "guards.h"

#include <utility>

namespace pyframe {
namespace {

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
// `pred(value)` for a freshly read value, released afterwards; a failed read (NULL) is false.
template <class Pred>
inline bool holds(PyObject *value, Pred pred) {
    if (value == nullptr) {
        return false;
    }
    bool ok = pred(value);
    Py_DECREF(value);
    return ok;
}

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

        // Each read is a new reference (or NULL: the check fails); cheapest and most selective first.
        return holds(dtype_get_.read(v, fast), [&](PyObject *r) { return r == dtype_.ptr(); })  // singletons
            && (device_is_cpu_
                    ? holds(is_cpu_get_.read(v, fast), [](PyObject *r) { return r == Py_True; })
                    : holds(device_get_.read(v, fast), [&](PyObject *r) {
                          return PyObject_RichCompareBool(r, device_.ptr(), Py_EQ) == 1;
                      }))
            && holds(requires_grad_get_.read(v, fast),
                     [&](PyObject *r) { return r == (requires_grad_ ? Py_True : Py_False); })
            && holds(shape_get_.read(v, fast), [&](PyObject *r) { return int_tuple_equals(r, sizes_); })
            && (use_contiguity_
                    ? holds(is_contiguous_call_.call(v, fast), [](PyObject *r) { return r == Py_True; })
                    : holds(stride_call_.call(v, fast), [&](PyObject *r) { return int_tuple_equals(r, strides_); }));
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

LeafPtr make_type_match(py::object tp, std::string text) {
    return std::make_unique<TypeMatch>(std::move(tp), std::move(text));
}
LeafPtr make_id_match(py::object obj, std::string text) {
    return std::make_unique<IdMatch>(std::move(obj), std::move(text));
}
LeafPtr make_equals_match(py::object value, std::string text) {
    return std::make_unique<EqualsMatch>(std::move(value), std::move(text));
}
LeafPtr make_none_match(bool want_none, std::string text) {
    return std::make_unique<NoneMatch>(want_none, std::move(text));
}
LeafPtr make_len_match(Py_ssize_t n, std::string text) {
    return std::make_unique<LenMatch>(n, std::move(text));
}
LeafPtr make_dict_keys_match(py::tuple keys, std::string text) {
    return std::make_unique<DictKeysMatch>(std::move(keys), std::move(text));
}
LeafPtr make_call_match(py::object fn, py::object expected, std::string text) {
    return std::make_unique<CallMatch>(std::move(fn), std::move(expected), std::move(text));
}
LeafPtr make_tensor_match(py::object tp, py::object dtype, py::object device,
                          std::vector<int64_t> sizes, std::vector<int64_t> strides,
                          bool requires_grad, std::string text) {
    return std::make_unique<TensorMatch>(std::move(tp), std::move(dtype), std::move(device),
                                         std::move(sizes), std::move(strides), requires_grad,
                                         std::move(text));
}

}  // namespace pyframe
