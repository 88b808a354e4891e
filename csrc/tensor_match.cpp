// tensor_match.cpp - TENSOR_MATCH, the guard on a tensor's metadata (docs/c_layer.md section 5).
//
// The one file of csrc/ that includes torch's headers. A tensor guard runs for every tensor
// input on every cached call, so it reads the metadata where it lives, in the at::TensorImpl
// behind the Python object, instead of through the Python getters (`t.shape` builds a
// torch.Size, `t.stride()` goes through torch's argument parser: about 250 ns a tensor, against
// about 15 ns here). Everything else in csrc/ knows only Python.
#include "guards.h"

#include <ATen/core/Tensor.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>

#include <utility>

namespace pyframe {
namespace {

bool equal(c10::IntArrayRef actual, const std::vector<int64_t> &expected) {
    return actual.size() == expected.size() &&
           std::equal(expected.begin(), expected.end(), actual.begin());
}

// type(v) is tp (torch.Tensor, nn.Parameter, or another subclass), then dtype, device,
// requires_grad, sizes and strides, cheapest first.
class TensorMatch final : public Leaf {
public:
    TensorMatch(py::object tp, py::object dtype, py::object device, std::vector<int64_t> sizes,
                std::vector<int64_t> strides, bool requires_grad, std::string text)
        : Leaf(std::move(text)),
          tp_obj_(std::move(tp)),
          sizes_(std::move(sizes)),
          strides_(std::move(strides)),
          requires_grad_(requires_grad) {
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
        try {
            // device() and the sizes/strides of Python-dispatch subclasses may call into
            // Python, and anything of torch's may throw: a failed read is a failed check.
            return impl->dtype().toScalarType() == dtype_ && impl->device() == device_ &&
                   impl->requires_grad() == requires_grad_ && equal(impl->sizes(), sizes_) &&
                   equal(impl->strides(), strides_);
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
};

}  // namespace

LeafPtr make_tensor_match(py::object tp, py::object dtype, py::object device,
                          std::vector<int64_t> sizes, std::vector<int64_t> strides,
                          bool requires_grad, std::string text) {
    return std::make_unique<TensorMatch>(std::move(tp), std::move(dtype), std::move(device),
                                         std::move(sizes), std::move(strides), requires_grad,
                                         std::move(text));
}

}  // namespace pyframe
