// torch_leaves.cpp - the leaves that read torch's own state (docs/c_layer.md section 5):
//   TENSOR_MATCH      a tensor's metadata
//   TORCH_STATE_MATCH the global (thread-local) state every trace depends on: grad mode,
//                     inference mode, the default dtype, autocast
//
// The one file of csrc/ that includes torch's headers. These leaves run on every cached call, so
// they read the state where it lives, in the at::TensorImpl behind a Python tensor and in c10's
// thread-locals, instead of through the Python getters (`t.shape` builds a torch.Size,
// `t.stride()` goes through torch's argument parser: about 250 ns a tensor, against about 15 ns
// here; `torch.is_grad_enabled()` is a ~25 ns Python call, GradMode::is_enabled() ~1 ns).
// Everything else in csrc/ knows only Python.
#include "guards.h"

#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>

#include <utility>

namespace pyframe {
namespace {

// A dimension whose size (or stride) is symbolic in the graph: not checked here, its relations
// are the shape checks' (guard_shapes.h). Sizes and strides of dense tensors are never negative.
constexpr int64_t kDynamic = -1;

bool equal(c10::IntArrayRef actual, const std::vector<int64_t> &expected) {
    if (actual.size() != expected.size()) {
        return false;
    }
    for (size_t i = 0; i < expected.size(); i++) {
        if (expected[i] != actual[i] && expected[i] != kDynamic) {
            return false;
        }
    }
    return true;
}

const c10::DispatchKeySet kFunctorchWrappers({c10::DispatchKey::FuncTorchBatched,
                                              c10::DispatchKey::FuncTorchGradWrapper,
                                              c10::DispatchKey::BatchedNestedTensor});

// type(v) is tp (torch.Tensor, nn.Parameter, or another subclass), then dtype, device,
// requires_grad, sizes and strides, cheapest first.
class TensorMatch final : public Leaf {
public:
    TensorMatch(py::object tp, py::object dtype, py::object device, std::vector<int64_t> sizes,
                std::vector<int64_t> strides, bool requires_grad, int64_t storage_offset,
                int64_t storage_nbytes, std::string text)
        : Leaf(std::move(text)),
          tp_obj_(std::move(tp)),
          sizes_(std::move(sizes)),
          strides_(std::move(strides)),
          requires_grad_(requires_grad),
          storage_offset_(storage_offset),
          storage_nbytes_(storage_nbytes) {
        if (!PyType_Check(tp_obj_.ptr()) ||
            PyObject_IsSubclass(tp_obj_.ptr(), THPVariableClass) != 1) {
            PyErr_Clear();
            throw py::type_error("add_tensor_match: tp must be torch.Tensor or a subclass");
        }
        if (!THPDtype_Check(dtype.ptr())) {
            throw py::type_error("add_tensor_match: dtype must be a torch.dtype");
        }
        if (!THPDevice_Check(device.ptr())) {
            throw py::type_error("add_tensor_match: device must be a torch.device");
        }
        tp_ = (PyTypeObject *)tp_obj_.ptr();
        dtype_ = ((THPDtype *)dtype.ptr())->scalar_type;
        device_ = ((THPDevice *)device.ptr())->device;
    }

    LeafKind kind() const override { return LeafKind::Tensor; }

    bool check(PyObject *v) override {
        if (Py_TYPE(v) != tp_) {
            return false;  // not a tensor (or another subclass): nothing below may read it
        }
        const c10::TensorImpl *impl = THPVariable_Unpack(v).unsafeGetTensorImpl();
        if (impl->has_symbolic_sizes_strides()) {
            return false;  // never true of a tensor a user passes in; sizes() would throw
        }
        if (impl->key_set().has_any(kFunctorchWrappers)) {
            // a torch.func transform's wrapper (vmap's batched tensor, grad's wrapper): its
            // metadata is the logical tensor's, but a graph compiled for a plain tensor would
            // ignore the transform. The trace never takes one as an input (builder.py).
            return false;
        }
        try {
            // device() and the sizes/strides of Python-dispatch subclasses may call into
            // Python, and anything of torch's may throw: a failed read is a failed check.
            return impl->dtype().toScalarType() == dtype_ && impl->device() == device_ &&
                   impl->requires_grad() == requires_grad_ && equal(impl->sizes(), sizes_) &&
                   equal(impl->strides(), strides_) &&
                   (storage_offset_ < 0 || impl->storage_offset() == storage_offset_) &&
                   (storage_nbytes_ < 0 ||
                    (impl->has_storage() &&
                     static_cast<int64_t>(impl->storage().nbytes()) == storage_nbytes_));
        } catch (const std::exception &) {
            return false;
        }
    }

private:
    py::object tp_obj_;
    PyTypeObject *tp_ = nullptr;
    at::ScalarType dtype_;
    c10::Device device_{c10::kCPU};
    std::vector<int64_t> sizes_, strides_;
    bool requires_grad_;
    int64_t storage_offset_;  // -1: not checked (the trace read no offset, shared no storage)
    int64_t storage_nbytes_;  // -1: not checked
};

// One piece of global torch state equals what it was while tracing. `expected` is a bool (grad
// and inference mode; whether an exception is being handled, for a trace that read sys.exc_info();
// whether nn.Module's global hook tables hold a hook, for a trace that inlined a module call),
// a torch.dtype (the default dtype), or, for autocast on a device, None (off) or the autocast
// dtype (on).
class TorchStateMatch final : public Leaf {
public:
    enum class State { GradMode, InferenceMode, DefaultDtype, AutocastCPU, AutocastCUDA, HandledException,
                       ModuleHooks };

    TorchStateMatch(const std::string &state, const py::object &expected, std::string text)
        : Leaf(std::move(text)) {
        if (state == "grad_mode" || state == "inference_mode" || state == "handled_exception") {
            state_ = state == "grad_mode" ? State::GradMode
                   : state == "inference_mode" ? State::InferenceMode : State::HandledException;
            if (!PyBool_Check(expected.ptr())) {
                throw py::type_error("add_torch_state_match: " + state + " expects a bool");
            }
            on_ = expected.ptr() == Py_True;
        } else if (state == "default_dtype") {
            state_ = State::DefaultDtype;
            dtype_ = dtype_of(expected, state);
        } else if (state == "autocast_cpu" || state == "autocast_cuda") {
            state_ = state == "autocast_cpu" ? State::AutocastCPU : State::AutocastCUDA;
            on_ = !expected.is_none();
            if (on_) {
                dtype_ = dtype_of(expected, state);
            }
        } else if (state == "module_hooks") {
            // nn.Module's global hook tables (register_module_forward_hook...): the dicts
            // themselves, held, as torch keeps the same four for the life of the process
            state_ = State::ModuleHooks;
            if (!PyBool_Check(expected.ptr())) {
                throw py::type_error("add_torch_state_match: " + state + " expects a bool");
            }
            on_ = expected.ptr() == Py_True;
            py::module_ hooks = py::module_::import("torch.nn.modules.module");
            for (const char *name : {"_global_forward_hooks", "_global_forward_pre_hooks",
                                     "_global_backward_hooks", "_global_backward_pre_hooks"}) {
                py::object table = hooks.attr(name);
                if (!PyDict_Check(table.ptr())) {
                    throw py::type_error(std::string("add_torch_state_match: torch.nn.modules.module.") + name +
                                         " is not a dict");
                }
                hook_tables_.push_back(std::move(table));
            }
        } else {
            throw py::value_error("add_torch_state_match: unknown state '" + state + "'");
        }
    }

    bool check(PyObject *) override {
        switch (state_) {
            case State::GradMode:
                return c10::GradMode::is_enabled() == on_;
            case State::InferenceMode:
                return c10::InferenceMode::is_enabled() == on_;
            case State::DefaultDtype:
                return c10::get_default_dtype_as_scalartype() == dtype_;
            case State::AutocastCPU:
                return autocast_matches(at::kCPU);
            case State::AutocastCUDA:
                return autocast_matches(at::kCUDA);
            case State::HandledException: {
                // sys.exc_info() as the frame sees it on entry: an except block of a caller
                PyObject *handled = PyErr_GetHandledException();
                bool some = handled != NULL && handled != Py_None;
                Py_XDECREF(handled);
                return some == on_;
            }
            case State::ModuleHooks: {
                bool some = false;
                for (const py::object &table : hook_tables_) {
                    some = some || PyDict_GET_SIZE(table.ptr()) > 0;
                }
                return some == on_;
            }
        }
        return false;
    }

private:
    static at::ScalarType dtype_of(const py::object &obj, const std::string &state) {
        if (!THPDtype_Check(obj.ptr())) {
            throw py::type_error("add_torch_state_match: " + state + " expects a torch.dtype");
        }
        return ((THPDtype *)obj.ptr())->scalar_type;
    }

    bool autocast_matches(at::DeviceType device) const {
        bool on = at::autocast::is_autocast_enabled(device);
        return on == on_ && (!on || at::autocast::get_autocast_dtype(device) == dtype_);
    }

    State state_ = State::GradMode;
    bool on_ = false;
    at::ScalarType dtype_ = at::kFloat;
    std::vector<py::object> hook_tables_;
};

}  // namespace

LeafPtr make_torch_state_match(const std::string &state, py::object expected, std::string text) {
    return std::make_unique<TorchStateMatch>(state, expected, std::move(text));
}

LeafPtr make_tensor_match(py::object tp, py::object dtype, py::object device,
                          std::vector<int64_t> sizes, std::vector<int64_t> strides,
                          bool requires_grad, int64_t storage_offset, int64_t storage_nbytes,
                          std::string text) {
    return std::make_unique<TensorMatch>(std::move(tp), std::move(dtype), std::move(device),
                                         std::move(sizes), std::move(strides), requires_grad,
                                         storage_offset, storage_nbytes, std::move(text));
}

PyObject *read_tensor_property(PyObject *v, int what, Py_ssize_t dim) {
    if (THPVariableClass == nullptr || !PyObject_TypeCheck(v, (PyTypeObject *)THPVariableClass)) {
        PyErr_SetString(PyExc_TypeError, "tensor_property: not a tensor");
        return nullptr;
    }
    try {
        const c10::TensorImpl *impl = THPVariable_Unpack(v).unsafeGetTensorImpl();
        if (impl->has_symbolic_sizes_strides()) {
            PyErr_SetString(PyExc_TypeError, "tensor_property: symbolic sizes");
            return nullptr;
        }
        if (what == 2) {
            return PyLong_FromLongLong(impl->storage_offset());
        }
        c10::IntArrayRef values = what == 0 ? impl->sizes() : impl->strides();
        if (dim >= static_cast<Py_ssize_t>(values.size())) {
            PyErr_SetString(PyExc_IndexError, "tensor_property: no such dimension");
            return nullptr;
        }
        return PyLong_FromLongLong(values[dim]);
    } catch (const std::exception &e) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
        return nullptr;
    }
}

bool tensor_int_property(PyObject *v, int what, Py_ssize_t dim, int64_t *out) {
    if (THPVariableClass == nullptr || !PyObject_TypeCheck(v, (PyTypeObject *)THPVariableClass)) {
        return false;
    }
    try {
        const c10::TensorImpl *impl = THPVariable_Unpack(v).unsafeGetTensorImpl();
        if (impl->has_symbolic_sizes_strides()) {
            return false;
        }
        if (what == 2) {
            *out = impl->storage_offset();
            return true;
        }
        c10::IntArrayRef values = what == 0 ? impl->sizes() : impl->strides();
        if (dim >= static_cast<Py_ssize_t>(values.size())) {
            return false;
        }
        *out = values[dim];
        return true;
    } catch (const std::exception &) {
        return false;
    }
}

const void *tensor_storage(PyObject *v) {
    // By the real type: isinstance() would ask `v.__class__`, which runs a class's own Python
    // __getattribute__ (and may lie); only a real tensor has a storage to unpack.
    if (THPVariableClass == nullptr || !PyObject_TypeCheck(v, (PyTypeObject *)THPVariableClass)) {
        return nullptr;
    }
    try {
        const c10::TensorImpl *impl = THPVariable_Unpack(v).unsafeGetTensorImpl();
        return impl->has_storage() ? impl->storage().unsafeGetStorageImpl() : nullptr;
    } catch (const std::exception &) {
        return nullptr;  // (a subclass whose storage cannot be read: it shares none we can see)
    }
}

}  // namespace pyframe
