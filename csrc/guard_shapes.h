// guard_shapes.h - the symbolic-shape checks of a guard tree: relations between the sizes of a
// frame's tensors (and its int arguments) that a trace with dynamic shapes relied on, such as
// `2 <= L['x'].size()[0]` or `L['x'].size()[0] == L['y'].size()[1]`.
//
// pyframe/fake/shapes.py lowers each guard of torch's ShapeEnv (a sympy relation) to a short
// postfix program over integers; the program's inputs are read from the identity slots of tree
// nodes after the rest of the tree passed, as the aliasing check reads its values: an int
// argument's value, or a tensor's size, stride or storage offset read straight from its
// TensorImpl (no Python int made, no node of its own). Evaluating one is a few dozen machine operations: a
// cached call with dynamic shapes still runs no Python.
#ifndef PYFRAME_GUARD_SHAPES_H
#define PYFRAME_GUARD_SHAPES_H

#include "guards.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pyframe {

// The program's instructions. Const and Load take one operand word; the others pop their
// operands and push the result (comparisons and logic push 0 or 1).
enum class ShapeOp : int64_t {
    Const, Load, Add, Sub, Mul, FloorDiv, Mod, Neg, Pow, Max, Min, Abs,
    Eq, Ne, Lt, Le, Gt, Ge, And, Or, Not,
};

// One input of a program: the value in identity slot `slot`, itself (what < 0: a Python int) or
// its size (0) or stride (1) in dimension `dim`, or its storage offset (2): a tensor's.
struct ShapeInput {
    int slot;
    int what;
    Py_ssize_t dim;
};

struct ShapeMatch {
    static constexpr size_t kMaxDepth = 32;

    std::vector<ShapeInput> inputs;  // in Load's operand order
    std::vector<int64_t> program;    // ShapeOp words, with their operands
    std::string text;

    // The input's value as an int64; false for a value that is no int (or no tensor with that
    // dimension), or an int past int64.
    static bool load(const ShapeInput &in, PyObject *v, int64_t *out) {
        if (v == nullptr) {
            return false;
        }
        if (in.what >= 0) {
            return tensor_int_property(v, in.what, in.dim, out);
        }
        if (!PyLong_CheckExact(v)) {
            return false;
        }
        int overflow = 0;
        *out = PyLong_AsLongLongAndOverflow(v, &overflow);
        return overflow == 0 && !(*out == -1 && PyErr_Occurred());
    }

    // Whether the program, run on the slots' values (Python ints), gives true. A value that is no
    // int, or arithmetic Python would not do on int64 (division by zero), fails.
    bool check(const std::vector<PyObject *> &values) const {
        int64_t stack[kMaxDepth];
        size_t top = 0;
        for (size_t pc = 0; pc < program.size(); pc++) {
            auto op = static_cast<ShapeOp>(program[pc]);
            if (op == ShapeOp::Const) {
                stack[top++] = program[++pc];
                continue;
            }
            if (op == ShapeOp::Load) {
                const ShapeInput &in = inputs[program[++pc]];
                if (!load(in, values[in.slot], &stack[top++])) {
                    return false;
                }
                continue;
            }
            if (op == ShapeOp::Neg || op == ShapeOp::Abs || op == ShapeOp::Not) {
                int64_t &a = stack[top - 1];
                a = op == ShapeOp::Neg ? -a : op == ShapeOp::Abs ? (a < 0 ? -a : a) : !a;
                continue;
            }
            int64_t b = stack[--top];
            int64_t &a = stack[top - 1];
            switch (op) {
                case ShapeOp::Add: a += b; break;
                case ShapeOp::Sub: a -= b; break;
                case ShapeOp::Mul: a *= b; break;
                case ShapeOp::FloorDiv:
                case ShapeOp::Mod: {
                    if (b == 0) {
                        return false;
                    }
                    int64_t q = a / b, r = a % b;
                    if (r != 0 && ((r < 0) != (b < 0))) {  // Python's floor, not C's truncation
                        q -= 1;
                        r += b;
                    }
                    a = op == ShapeOp::FloorDiv ? q : r;
                    break;
                }
                case ShapeOp::Pow: {
                    if (b < 0) {
                        return false;
                    }
                    int64_t r = 1;
                    for (int64_t i = 0; i < b; i++) {
                        r *= a;
                    }
                    a = r;
                    break;
                }
                case ShapeOp::Max: a = a > b ? a : b; break;
                case ShapeOp::Min: a = a < b ? a : b; break;
                case ShapeOp::Eq: a = a == b; break;
                case ShapeOp::Ne: a = a != b; break;
                case ShapeOp::Lt: a = a < b; break;
                case ShapeOp::Le: a = a <= b; break;
                case ShapeOp::Gt: a = a > b; break;
                case ShapeOp::Ge: a = a >= b; break;
                case ShapeOp::And: a = a && b; break;
                case ShapeOp::Or: a = a || b; break;
                default: return false;
            }
        }
        return top == 1 && stack[0] != 0;
    }

    // Builds one from Python's words; throws ValueError for a program that could misbehave (an
    // unknown op, an operand missing, a stack deeper than kMaxDepth or not ending with one value).
    static ShapeMatch make(std::vector<ShapeInput> inputs, std::vector<int64_t> program, std::string text) {
        size_t depth = 0, deepest = 0;
        for (size_t pc = 0; pc < program.size(); pc++) {
            int64_t word = program[pc];
            if (word < 0 || word > static_cast<int64_t>(ShapeOp::Not)) {
                throw py::value_error("add_shape_match: unknown op " + std::to_string(word));
            }
            auto op = static_cast<ShapeOp>(word);
            if (op == ShapeOp::Const || op == ShapeOp::Load) {
                if (pc + 1 >= program.size()) {
                    throw py::value_error("add_shape_match: an operand is missing");
                }
                if (op == ShapeOp::Load &&
                    (program[pc + 1] < 0 || program[pc + 1] >= static_cast<int64_t>(inputs.size()))) {
                    throw py::value_error("add_shape_match: a load names no input");
                }
                pc++;
                depth++;
            } else if (op == ShapeOp::Neg || op == ShapeOp::Abs || op == ShapeOp::Not) {
                if (depth < 1) {
                    throw py::value_error("add_shape_match: stack underflow");
                }
            } else {
                if (depth < 2) {
                    throw py::value_error("add_shape_match: stack underflow");
                }
                depth--;
            }
            deepest = depth > deepest ? depth : deepest;
        }
        if (depth != 1 || deepest > kMaxDepth) {
            throw py::value_error("add_shape_match: the program must leave one value, within 32 levels");
        }
        return ShapeMatch{std::move(inputs), std::move(program), std::move(text)};
    }
};

}  // namespace pyframe

#endif  // PYFRAME_GUARD_SHAPES_H
