// guard_build.cpp - building a guard tree from Python (pyframe/guards.py lowers a GuardSet
// through these methods) and reporting on it: the first failing check, every check's text.
#include "guard_tree.h"

#include <pybind11/stl.h>

namespace pyframe {

namespace {

void check_index(Py_ssize_t index) {
    if (index < 0) {
        throw py::value_error("dict_key/dict_value: the index must be >= 0");
    }
}

// The first failing check among `leaves` (run on `v`), then among `nodes` and below them (each
// node's value fetched by `fetch`): one loop for a node's subtree and for the root's.
template <typename Fetch>
const std::string *first_failure_in(const std::vector<LeafPtr> &leaves, PyObject *v,
                                    const std::vector<std::unique_ptr<GuardManager>> &nodes, Fetch fetch) {
    for (const auto &leaf : leaves) {
        if (!leaf->check(v)) {
            PyErr_Clear();
            return &leaf->text();
        }
    }
    for (const auto &n : nodes) {
        PyObject *nv = fetch(*n);
        if (nv == nullptr) {
            PyErr_Clear();
            return n->unreadable_text();
        }
        const std::string *t = n->first_failure_value(nv);
        Py_DECREF(nv);
        if (t != nullptr) {
            return t;
        }
    }
    return nullptr;
}

}  // namespace

// ---- nodes ------------------------------------------------------------------------------------

GuardManager::GuardManager(Access access, py::object key, Py_ssize_t index, std::string source)
    : access_(access), key_(std::move(key)), index_(index), source_(std::move(source)),
      generic_(access == Access::GenericAttr ||
               (access == Access::Attr && PyUnicode_Check(key_.ptr()) &&
                (PyUnicode_CompareWithASCIIString(key_.ptr(), "__class__") == 0 ||
                 PyUnicode_CompareWithASCIIString(key_.ptr(), "__dict__") == 0))) {}

GuardManager *GuardManager::attr(const py::str &name) {
    return child(Access::Attr, name, 0, source_ + "." + name.cast<std::string>());
}

GuardManager *GuardManager::generic_attr(const py::str &name) {
    return child(Access::GenericAttr, name, 0,
                 "object.__getattribute__(" + source_ + ", " + repr_of(name) + ")");
}

GuardManager *GuardManager::item(const py::object &key) {
    return child(Access::Item, key, 0, source_ + "[" + repr_of(key) + "]");
}

// The index-th key of a dict, and its value, in the dict's iteration order: keys that are
// not constants (tensors, modules...), which a child cannot name by value.
GuardManager *GuardManager::dict_key(Py_ssize_t index) {
    check_index(index);
    return child(Access::DictKey, py::none(), index, key_text(index));
}

GuardManager *GuardManager::dict_value(Py_ssize_t index) {
    check_index(index);
    return child(Access::DictValue, py::none(), index, source_ + "[" + key_text(index) + "]");
}

// The items a tuple iterator has still to give, as a tuple (an iterator a loop hands to a
// resume function): its items and length are guarded as a tuple's.
GuardManager *GuardManager::tuple_iterator_rest() {
    return child(Access::TupleIterRest, py::none(), 0, "___tuple_iterator_rest(" + source_ + ")");
}

// `v()` for a weakref.ref v: the referent as it is now, None once it died. (A referent dies
// without a version changing anywhere: a snapshot above never covers this node, see child().)
GuardManager *GuardManager::weakref_call() {
    return child(Access::WeakRefCall, py::none(), 0, source_ + "()");
}

GuardManager *GuardManager::tensor_property(const std::string &what, Py_ssize_t dim) {
    if (what == "storage_offset") {
        return child(Access::TensorStorageOffset, py::none(), 0, source_ + ".storage_offset()");
    }
    if ((what != "size" && what != "stride") || dim < 0) {
        throw py::value_error("tensor_property: 'size' or 'stride' of a dimension >= 0, or 'storage_offset'");
    }
    return child(what == "size" ? Access::TensorSize : Access::TensorStride, py::none(), dim,
                 source_ + "." + what + "()[" + std::to_string(dim) + "]");
}

std::string GuardManager::key_text(Py_ssize_t index) const {
    return "list(dict.keys(" + source_ + "))[" + std::to_string(index) + "]";
}

GuardManager *GuardManager::child(Access access, const py::object &key, Py_ssize_t index,
                    std::string source) {
    // (an iterator moves on without a version: a snapshot of its parent is never safe)
    // (nor a tensor's sizes: resize_ changes them in place; nor a weakref's referent: it dies)
    has_item_children_ = has_item_children_ || access == Access::Item ||
                         access == Access::DictKey || access == Access::DictValue ||
                         access == Access::TupleIterRest || access == Access::WeakRefCall ||
                         access == Access::TensorSize ||
                         access == Access::TensorStride || access == Access::TensorStorageOffset;
    has_position_children_ = has_position_children_ || access == Access::DictKey ||
                             access == Access::DictValue;
    snapshot_valid_ = false;
    never_safe_ = false;
    return find_or_add(children_, access, key, index, std::move(source));
}

bool GuardManager::same_key(Access access, const py::object &key, Py_ssize_t index) const {
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

GuardManager *GuardManager::find_or_add(std::vector<std::unique_ptr<GuardManager>> &nodes,
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

// ---- leaves -----------------------------------------------------------------------------------

void GuardManager::add(LeafPtr leaf) {
    pins_identity_ = pins_identity_ || leaf->kind() == LeafKind::Identity;
    leaves_.push_back(std::move(leaf));
}

void GuardManager::add_type_match(py::object tp, std::string text) {
    if (text.empty()) {
        text = "type(" + source_ + ") is " + qualname_of(tp);
    }
    // (see pinned(): lists, dicts and tuples cannot be weakly referenced; they stay facts of an
    // enclosing snapshot, as before)
    pins_type_ = pins_type_ || (PyType_Check(tp.ptr()) && ((PyTypeObject *)tp.ptr())->tp_weaklistoffset > 0);
    add(make_type_match(std::move(tp), std::move(text)));
}

void GuardManager::add_id_match(py::object obj, std::string text) {
    if (text.empty()) {
        text = source_ + " is " + repr_of(obj);
    }
    add(make_id_match(std::move(obj), std::move(text)));
}

void GuardManager::add_equals_match(py::object value, std::string text) {
    if (text.empty()) {
        text = source_ + " == " + repr_of(value);
    }
    add(make_equals_match(std::move(value), std::move(text)));
}

void GuardManager::add_none_match(std::string text) {
    add(make_none_match(true, text.empty() ? source_ + " is None" : text));
}

void GuardManager::add_not_none_match(std::string text) {
    add(make_none_match(false, text.empty() ? source_ + " is not None" : text));
}

void GuardManager::add_len_match(Py_ssize_t n, std::string text) {
    if (text.empty()) {
        text = "len(" + source_ + ") == " + std::to_string(n);
    }
    add(make_len_match(n, std::move(text)));
}

void GuardManager::add_attrs_len_match(std::vector<py::str> names, std::vector<Py_ssize_t> lengths,
                                       std::string text) {
    if (text.empty()) {
        text = "len of " + source_ + "'s attributes";
    }
    add(make_attrs_len_match(std::move(names), std::move(lengths), std::move(text)));
}

void GuardManager::add_dict_keys_match(py::tuple keys, std::string text) {
    if (text.empty()) {
        text = "tuple(" + source_ + ".keys()) == " + repr_of(keys);
    }
    add(make_dict_keys_match(std::move(keys), std::move(text)));
}

void GuardManager::add_dict_keys_id_match(py::tuple keys, std::vector<bool> by_id, std::string text) {
    if (text.empty()) {
        text = "keys_by_id(" + source_ + ") == " + repr_of(keys);
    }
    add(make_dict_keys_id_match(std::move(keys), std::move(by_id), std::move(text)));
}

void GuardManager::add_hasattr_match(py::str name, bool expected, std::string text) {
    if (text.empty()) {
        text = std::string(expected ? "" : "not ") + "hasattr(" + source_ + ", " + repr_of(name) + ")";
    }
    add(make_hasattr_match(std::move(name), expected, std::move(text)));
}

void GuardManager::add_class_attr_match(py::str name, py::object expected, bool check_instance, std::string text) {
    add(make_class_attr_match(std::move(name), std::move(expected), check_instance, std::move(text)));
}

void GuardManager::add_dict_contains_match(py::object key, bool expected, std::string text) {
    if (text.empty()) {
        text = repr_of(key) + (expected ? " in " : " not in ") + source_;
    }
    add(make_dict_contains_match(std::move(key), expected, std::move(text)));
}

void GuardManager::add_tensor_match(py::object tp, py::object dtype, py::object device,
                      std::vector<int64_t> sizes, std::vector<int64_t> strides,
                      bool requires_grad, std::string text, int64_t storage_offset,
                      int64_t storage_nbytes) {
    if (text.empty()) {
        text = "check_tensor(" + source_ + ", " + qualname_of(tp) + ", " + repr_of(dtype) +
               ", " + repr_of(device) + ", size=" + repr_of(py::cast(sizes)) +
               ", stride=" + repr_of(py::cast(strides)) +
               ", requires_grad=" + (requires_grad ? "True" : "False") + ")";
    }
    add(make_tensor_match(std::move(tp), std::move(dtype), std::move(device),
                          std::move(sizes), std::move(strides), requires_grad,
                          storage_offset, storage_nbytes, std::move(text)));
}

// ---- reporting --------------------------------------------------------------------------------

const std::string *GuardManager::first_failure_value(PyObject *v) const {
    return first_failure_in(leaves_, v, children_, [v](const GuardManager &c) { return c.fetch_from(v); });
}

// When this node's value cannot be fetched, every check below it fails: report the first.
const std::string *GuardManager::unreadable_text() {
    const std::string *t = first_text();
    if (t == nullptr) {
        unreadable_ = source_ + " cannot be read";
        return &unreadable_;
    }
    return t;
}

const std::string *GuardManager::first_text() const {
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

void GuardManager::collect_texts(std::vector<std::string> &out) const {
    for (const auto &leaf : leaves_) {
        out.push_back(leaf->text());
    }
    for (const auto &c : children_) {
        c->collect_texts(out);
    }
}

std::vector<std::string> GuardManager::texts() const {
    std::vector<std::string> out;
    collect_texts(out);
    return out;
}

// ---- the root ---------------------------------------------------------------------------------

GuardManager *RootGuardManager::local(const py::str &name, Py_ssize_t index) {
    if (index < 0) {
        throw py::value_error("local: the slot index must be >= 0");
    }
    return GuardManager::find_or_add(roots_, Access::Local, name, index,
                                     "L[" + repr_of(name) + "]");
}

GuardManager *RootGuardManager::global_(const py::str &name) {
    return GuardManager::find_or_add(roots_, Access::Global, name, 0,
                                     "G[" + repr_of(name) + "]");
}

GuardManager *RootGuardManager::globals_dict() {
    return GuardManager::find_or_add(roots_, Access::GlobalsDict, py::none(), 0, "G");
}

GuardManager *RootGuardManager::builtin(const py::str &name) {
    return GuardManager::find_or_add(roots_, Access::Builtin, name, 0,
                                     "B[" + repr_of(name) + "]");
}

GuardManager *RootGuardManager::closure(Py_ssize_t index) {
    if (index < 0) {
        throw py::value_error("closure: the cell index must be >= 0");
    }
    return GuardManager::find_or_add(roots_, Access::Closure, py::none(), index,
                                     "C[" + std::to_string(index) + "].cell_contents");
}

void RootGuardManager::add_call_match(py::object fn, py::object expected, std::string text) {
    if (text.empty()) {
        std::string name = py::hasattr(fn, "__qualname__")
                               ? py::str(fn.attr("__qualname__")).cast<std::string>()
                               : repr_of(fn);
        text = name + "() == " + repr_of(expected);
    }
    leaves_.push_back(make_call_match(std::move(fn), std::move(expected), std::move(text)));
}

void RootGuardManager::add_torch_state_match(const std::string &state, py::object expected, std::string text) {
    if (text.empty()) {
        text = state + " == " + repr_of(expected);
    }
    leaves_.push_back(make_torch_state_match(state, std::move(expected), std::move(text)));
}

// Mark `node` (a node of this tree) as exported; returns its index in the exports tuple.
int RootGuardManager::export_node(GuardManager *node) {
    if (node->export_index() < 0) {
        node->set_export_index(n_exports_++);
    }
    return node->export_index();
}

void RootGuardManager::group_exports(int n) {
    if (n <= 0 || n >= n_exports_) {
        throw py::value_error("group_exports(" + std::to_string(n) + "): a group of 1 to " +
                              std::to_string(n_exports_ - 1) + " exports (others must follow it)");
    }
    grouped_ = n;
}

// aliasing(nodes...) == classes (AliasingMatch): the nodes' values are one object where the
// classes are equal, distinct objects elsewhere. Checked after the whole tree passed.
void RootGuardManager::add_aliasing_match(const std::vector<GuardManager *> &nodes, std::vector<int> classes,
                        std::string text, std::vector<int> storage_classes) {
    if (nodes.size() != classes.size() ||
        (!storage_classes.empty() && storage_classes.size() != classes.size())) {
        throw py::value_error("add_aliasing_match: one class (and storage class) per node");
    }
    AliasingMatch match{{}, AliasingMatch::number_by_first_appearance(classes), std::move(text)};
    match.storage_classes = AliasingMatch::number_by_first_appearance(storage_classes);
    for (const auto *numbers : {&match.classes, &match.storage_classes}) {
        int count = numbers->empty() ? 0 : *std::max_element(numbers->begin(), numbers->end()) + 1;
        (numbers == &match.classes ? match.n_classes : match.n_storage_classes) = count;
    }
    for (GuardManager *node : nodes) {
        match.slots.push_back(slot_of(node));
    }
    if (match.text.empty()) {
        match.text = "aliasing(...) of " + std::to_string(nodes.size()) + " values";
    }
    aliasing_.push_back(std::move(match));
}

// program(nodes...) is true (ShapeMatch): checked after the whole tree passed. `reads` (one per
// node, or empty: every node's value is an int) says what each input is: "value" (the node's int
// value), or "size"/"stride" in a dimension or "storage_offset" of the node's tensor.
void RootGuardManager::add_shape_match(const std::vector<GuardManager *> &nodes, std::vector<int64_t> program,
                                       std::string text,
                                       const std::vector<std::pair<std::string, Py_ssize_t>> &reads) {
    if (!reads.empty() && reads.size() != nodes.size()) {
        throw py::value_error("add_shape_match: one read per node");
    }
    std::vector<ShapeInput> inputs;
    for (size_t i = 0; i < nodes.size(); i++) {
        const std::string &what = reads.empty() ? std::string("value") : reads[i].first;
        Py_ssize_t dim = reads.empty() ? 0 : reads[i].second;
        int code = what == "value" ? -1 : what == "size" ? 0 : what == "stride" ? 1 : what == "storage_offset" ? 2 : -2;
        if (code == -2 || dim < 0) {
            throw py::value_error("add_shape_match: a read is 'value', 'size' or 'stride' of a dimension >= 0, "
                                  "or 'storage_offset'");
        }
        inputs.push_back(ShapeInput{slot_of(nodes[i]), code, dim});
    }
    shapes_.push_back(ShapeMatch::make(std::move(inputs), std::move(program), std::move(text)));
}

int RootGuardManager::slot_of(GuardManager *node) {
    if (node->identity_slot() < 0) {
        node->set_identity_slot(n_identities_++);
    }
    return node->identity_slot();
}

const std::string *RootGuardManager::first_failure(const FrameView &fv) {
    const std::string *failed = first_failure_of_tree(fv);
    if (failed != nullptr || (aliasing_.empty() && shapes_.empty())) {
        return failed;
    }
    std::vector<PyObject *> identities(n_identities_, nullptr);  // every check passed: read them
    Run how{false, nullptr, &identities};
    bool tree_ok = run_tree(fv, how);
    for (const auto &match : aliasing_) {
        if (failed == nullptr && (!tree_ok || !match.check(identities))) {
            failed = &match.text;
        }
    }
    for (const auto &match : shapes_) {
        if (failed == nullptr && (!tree_ok || !match.check(identities))) {
            failed = &match.text;
        }
    }
    release(identities);
    PyErr_Clear();
    return failed;
}

const std::string *RootGuardManager::first_failure_of_tree(const FrameView &fv) {
    return first_failure_in(leaves_, nullptr, roots_, [&fv](const GuardManager &n) { return n.fetch_root(fv); });
}

py::list RootGuardManager::snapshots() const {
    py::list out;
    for (const auto &n : roots_) {
        n->collect_snapshots(out);
    }
    return out;
}

std::vector<std::string> RootGuardManager::texts() const {
    std::vector<std::string> out;
    for (const auto &leaf : leaves_) {
        out.push_back(leaf->text());
    }
    for (const auto &n : roots_) {
        n->collect_texts(out);
    }
    for (const auto &match : aliasing_) {
        out.push_back(match.text);
    }
    for (const auto &match : shapes_) {
        out.push_back(match.text);
    }
    return out;
}

}  // namespace pyframe
