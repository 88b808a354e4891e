// leaves.cpp - the leaf checks of pyframe's guard trees (docs/c_layer.md section 5).
//
// Every check() runs on the hook's hit path, so it uses the raw CPython API: identity before
// equality, exact-type tests before anything that can call Python code. TENSOR_MATCH is in
// torch_leaves.cpp, the one file that includes torch's headers.
#include "guards.h"

#include <cmath>
#include <cstring>
#include <utility>

namespace pyframe {
namespace {

class TypeMatch final : public Leaf {
public:
    TypeMatch(py::object tp, std::string text) : Leaf(std::move(text)), tp_(std::move(tp)) {}
    bool check(PyObject *v) override { return (PyObject *)Py_TYPE(v) == tp_.ptr(); }
    LeafKind kind() const override { return LeafKind::Type; }

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
    LeafKind kind() const override { return LeafKind::Identity; }

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
        return same_value(v, expected);
    }

private:
    // == is too coarse for numbers a trace folds: 0.0 == -0.0, yet copysign, atan2, 1/x and
    // str() tell them apart, and nan != nan, yet a nan traces the same. Floats (and the parts of
    // complex numbers) are compared bit for bit, tuples item by item; the rest by ==.
    static bool same_double(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

    static bool same_value(PyObject *v, PyObject *expected) {
        if (v == expected) {
            return true;
        }
        if (Py_TYPE(v) != Py_TYPE(expected)) {
            return false;
        }
        if (PyFloat_CheckExact(expected)) {
            return same_double(PyFloat_AS_DOUBLE(v), PyFloat_AS_DOUBLE(expected));
        }
        if (PyComplex_CheckExact(expected)) {
            Py_complex a = PyComplex_AsCComplex(v), b = PyComplex_AsCComplex(expected);
            return same_double(a.real, b.real) && same_double(a.imag, b.imag);
        }
        if (PyTuple_CheckExact(expected)) {
            Py_ssize_t n = PyTuple_GET_SIZE(expected);
            if (PyTuple_GET_SIZE(v) != n) {
                return false;
            }
            for (Py_ssize_t i = 0; i < n; i++) {
                if (!same_value(PyTuple_GET_ITEM(v, i), PyTuple_GET_ITEM(expected, i))) {
                    return false;
                }
            }
            return true;
        }
        int equal = PyObject_RichCompareBool(v, expected, Py_EQ);
        if (equal < 0) {
            PyErr_Clear();  /* a failing __eq__ is a failing guard, never an error of the call */
            return false;
        }
        return equal == 1;
    }

public:

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
        Py_ssize_t n = PyObject_Size(v);
        if (n < 0) {
            PyErr_Clear();  /* not sized: the guard fails, the call does not */
            return false;
        }
        return n == n_;
    }

private:
    Py_ssize_t n_;
};

// `len(getattr(v, name)) == n` for several attributes of v at once: a module's four hook tables,
// one leaf instead of a child node and a LenMatch for each (a model calls a hundred modules).
// Each attribute is read as an Attr child reads it (getattr), and sized as LenMatch sizes it.
class AttrsLenMatch final : public Leaf {
public:
    AttrsLenMatch(std::vector<py::str> names, std::vector<Py_ssize_t> lengths, std::string text)
        : Leaf(std::move(text)), names_(std::move(names)), lengths_(std::move(lengths)) {
        if (names_.size() != lengths_.size()) {
            throw py::value_error("add_attrs_len_match: one length per attribute name");
        }
    }
    bool check(PyObject *v) override {
        for (size_t i = 0; i < names_.size(); i++) {
            PyObject *attr = PyObject_GetAttr(v, names_[i].ptr());
            if (attr == nullptr) {
                return false;  // (the tree clears the error)
            }
            Py_ssize_t n = PyObject_Size(attr);
            Py_DECREF(attr);
            if (n != lengths_[i]) {
                PyErr_Clear();  // (n < 0: not sized, the guard fails, the call does not)
                return false;
            }
        }
        return true;
    }
    LeafKind kind() const override { return LeafKind::Lengths; }
    const std::vector<py::str> &attrs() const override { return names_; }

private:
    std::vector<py::str> names_;
    std::vector<Py_ssize_t> lengths_;
};

// A dict's keys (or a mappingproxy's: a class's __dict__), in order (`tuple(v.keys()) == (...)`), each a constant compared by exact type
// and value; or (`keys_by_id(v) == [...]`) where some keys hash by identity (tensors, modules,
// functions, classes), those compared by identity (a weak reference when the key supports them,
// so the guard keeps no parameter alive and fails once the key died).
class DictKeysMatch final : public Leaf {
public:
    DictKeysMatch(py::tuple keys, std::vector<bool> by_id, std::string text)
        : Leaf(std::move(text)), by_id_(std::move(by_id)) {
        Py_ssize_t n = PyTuple_GET_SIZE(keys.ptr());
        if (static_cast<Py_ssize_t>(by_id_.size()) != n) {
            throw py::value_error("dict_keys_id_match: one by_id flag per key");
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            py::object key = py::reinterpret_borrow<py::object>(PyTuple_GET_ITEM(keys.ptr(), i));
            raw_.push_back(key.ptr());
            weak_.push_back(false);
            if (by_id_[i]) {
                PyObject *ref = PyWeakref_NewRef(key.ptr(), nullptr);
                if (ref != nullptr) {
                    refs_.push_back(py::reinterpret_steal<py::object>(ref));
                    weak_.back() = true;
                    continue;
                }
                PyErr_Clear();
            }
            refs_.push_back(std::move(key));
        }
    }
    bool check(PyObject *v) override {
        Py_ssize_t n = static_cast<Py_ssize_t>(raw_.size());
        if (PyObject *mapping = pf_mappingproxy_mapping(v)) {
            v = mapping;  // `Cls.__dict__`: the keys of the class's dict, which the proxy reads
        }
        if (!PyDict_Check(v) || PyDict_GET_SIZE(v) != n) {
            return false;
        }
        DictKeyWalker walk(v);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *key = walk.next();
            if (key == nullptr) {
                return false;
            }
            PyObject *expected = raw_[i];
            if (by_id_[i]) {
                if (key != expected || (weak_[i] && PyWeakref_GET_OBJECT(refs_[i].ptr()) != expected)) {
                    return false;
                }
                continue;
            }
            if (key == expected) {
                continue;
            }
            if (Py_TYPE(key) != Py_TYPE(expected)) {
                return false;  // 1, 1.0 and True are one key, but iterating the dict tells them apart
            }
            int eq = PyObject_RichCompareBool(key, expected, Py_EQ);
            if (eq != 1 || PyDict_GET_SIZE(v) != n) {
                return false;
            }
        }
        return true;
    }

    LeafKind kind() const override { return LeafKind::Keys; }

private:
    std::vector<bool> by_id_;
    std::vector<PyObject *> raw_;
    std::vector<py::object> refs_;  // a weak reference (by_id and weakly referenceable) or the key
    std::vector<bool> weak_;
};

// hasattr(v, name) == expected: an attribute the trace found missing (getattr with a default, a
// class pattern's keyword) or present without reading it. The translator adds it only on values
// whose attribute lookup runs no Python code (no __getattr__, no Python __getattribute__).
class HasAttrMatch final : public Leaf {
public:
    HasAttrMatch(py::str name, bool expected, std::string text)
        : Leaf(std::move(text)), name_(std::move(name)), expected_(expected) {}
    bool check(PyObject *v) override {
        if (PyType_Check(v) && Py_TYPE(v)->tp_getattro == PyType_Type.tp_getattro &&
            _PyType_Lookup(Py_TYPE(v), name_.ptr()) == nullptr &&
            _PyType_Lookup((PyTypeObject *)v, name_.ptr()) == nullptr) {
            // A class with type's own lookup, the name in neither its MRO nor its metaclass's:
            // missing, decided without the AttributeError type's lookup would make and clear.
            return !expected_;
        }
        PyObject *attr = nullptr;
        int found = _PyObject_LookupAttr(v, name_.ptr(), &attr);  // no AttributeError to clear
        Py_XDECREF(attr);
        return found >= 0 && (found == 1) == expected_;
    }
    LeafKind kind() const override { return LeafKind::Attribute; }

private:
    py::str name_;
    bool expected_;
};

// What object's generic lookup of `name` on v finds is `expected`, an attribute of v's class (a
// method, a property, a class's __call__), found through the MRO as _PyType_Lookup finds it; or,
// `expected` NULL, that neither the class nor the instance dict has the name. Unless the class's
// attribute is a data descriptor (it wins over the instance dict) or `check_instance` is false (a
// special method, looked up on the type only), the name must not be in v's instance dict either:
// `obj.act = fn` shadows the class's method. Replacing the attribute on the class or on any base
// changes what _PyType_Lookup returns, so a method patched after compiling fails the guard. Kind
// Attribute: it reads the type and the instance dict, which a pinned subtree's snapshot records.
class ClassAttrMatch final : public Leaf {
public:
    ClassAttrMatch(py::str name, py::object expected, bool check_instance, std::string text)
        : Leaf(std::move(text)), name_(std::move(name)), expected_(std::move(expected)),
          check_instance_(check_instance) {}
    bool check(PyObject *v) override {
        PyObject *expected = expected_.is_none() ? nullptr : expected_.ptr();
        PyObject *found = _PyType_Lookup(Py_TYPE(v), name_.ptr());  // borrowed; never raises
        if (found != expected) {
            return false;
        }
        if (!check_instance_ || (found != nullptr && Py_TYPE(found)->tp_descr_set != nullptr)) {
            return true;
        }
        PyObject *dict = pf_instance_dict(v);
        if (dict == nullptr) {
            return true;
        }
        int in_dict = PyDict_Contains(dict, name_.ptr());
        if (in_dict < 0) {
            PyErr_Clear();
            return false;
        }
        return in_dict == 0;
    }
    LeafKind kind() const override { return LeafKind::Attribute; }

private:
    py::str name_;
    py::object expected_;  // None: the name is missing
    bool check_instance_;
};

// (key in v) == expected, v a dict: a name the trace found missing from a globals dict (a builtin
// it used instead: a global of that name defined later shadows it) or present.
class DictContainsMatch final : public Leaf {
public:
    DictContainsMatch(py::object key, bool expected, std::string text)
        : Leaf(std::move(text)), key_(std::move(key)), expected_(expected) {}
    bool check(PyObject *v) override {
        if (!PyDict_Check(v)) {
            return false;
        }
        int found = PyDict_Contains(v, key_.ptr());
        if (found < 0) {
            PyErr_Clear();
            return false;
        }
        return (found == 1) == expected_;
    }
    LeafKind kind() const override { return LeafKind::Keys; }

private:
    py::object key_;
    bool expected_;
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
LeafPtr make_attrs_len_match(std::vector<py::str> names, std::vector<Py_ssize_t> lengths, std::string text) {
    return std::make_unique<AttrsLenMatch>(std::move(names), std::move(lengths), std::move(text));
}
LeafPtr make_dict_keys_match(py::tuple keys, std::string text) {
    std::vector<bool> by_value(PyTuple_GET_SIZE(keys.ptr()), false);
    return std::make_unique<DictKeysMatch>(std::move(keys), std::move(by_value), std::move(text));
}
LeafPtr make_dict_keys_id_match(py::tuple keys, std::vector<bool> by_id, std::string text) {
    return std::make_unique<DictKeysMatch>(std::move(keys), std::move(by_id), std::move(text));
}
LeafPtr make_hasattr_match(py::str name, bool expected, std::string text) {
    return std::make_unique<HasAttrMatch>(std::move(name), expected, std::move(text));
}
LeafPtr make_class_attr_match(py::str name, py::object expected, bool check_instance, std::string text) {
    return std::make_unique<ClassAttrMatch>(std::move(name), std::move(expected), check_instance, std::move(text));
}
LeafPtr make_dict_contains_match(py::object key, bool expected, std::string text) {
    return std::make_unique<DictContainsMatch>(std::move(key), expected, std::move(text));
}
LeafPtr make_call_match(py::object fn, py::object expected, std::string text) {
    return std::make_unique<CallMatch>(std::move(fn), std::move(expected), std::move(text));
}

}  // namespace pyframe
