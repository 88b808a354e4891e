// guard_aliasing.h - the aliasing check of a guard tree: which of a frame's values are one
// object (or share one storage), checked after the rest of the tree on the values it read.
#ifndef PYFRAME_GUARD_ALIASING_H
#define PYFRAME_GUARD_ALIASING_H

#include "guards.h"

#include <algorithm>
#include <string>
#include <vector>

namespace pyframe {

// aliasing(s_1, ..., s_n) == [c_1, ..., c_n]: the values at these sources are one object where
// the classes are equal and distinct objects where they differ (a trace that compared tensors of
// the frame by identity, as dict keys, holds for no other arrangement). O(n + k^2) for k classes
// up to 32, O(n + k log k) past that; no allocation in the common case.
struct AliasingMatch {
    std::vector<int> slots;    // identity slots of the sources' nodes
    std::vector<int> classes;  // one per slot
    std::string text;
    int n_classes = 0;
    // One per slot, or empty: the values are tensors on one storage where these are equal and on
    // distinct storages where they differ. Two distinct tensors can still overlap in memory
    // (`base[0:4]`, `base[2:6]`), and a functionalized graph traced for separate storages
    // computes something else for them.
    std::vector<int> storage_classes;
    int n_storage_classes = 0;

    bool check(const std::vector<PyObject *> &values) const {
        auto object = [&](size_t i) -> const void * { return values[slots[i]]; };
        if (!partition_holds(classes, n_classes, object)) {
            return false;
        }
        // (every value is there now.) A value with no storage (no tensor) is its own storage.
        auto storage = [&](size_t i) -> const void * {
            const void *s = tensor_storage(values[slots[i]]);
            return s != nullptr ? s : values[slots[i]];
        };
        return storage_classes.empty() || partition_holds(storage_classes, n_storage_classes, storage);
    }

    // Classes are numbered in order of first appearance (see number_by_first_appearance), so the
    // first member of each class is met before the others: each later member must be its class's
    // first (one class, one key), and each first must differ from every earlier class's (one key,
    // one class). No allocation up to kPairwise classes; past that, the firsts are sorted.
    static constexpr size_t kPairwise = 32;

    template <typename Key>
    static bool partition_holds(const std::vector<int> &classes, int count, Key key) {
        const void *small[kPairwise];
        std::vector<const void *> large;
        const void **firsts = small;
        if (static_cast<size_t>(count) > kPairwise) {
            large.resize(count);
            firsts = large.data();
        }
        int n_classes = 0;
        for (size_t i = 0; i < classes.size(); i++) {
            const void *k = key(i);
            if (k == nullptr) {
                return false;
            }
            if (classes[i] < n_classes) {
                if (firsts[classes[i]] != k) {
                    return false;
                }
                continue;
            }
            firsts[n_classes++] = k;
            if (large.empty()) {
                for (int j = 0; j + 1 < n_classes; j++) {
                    if (firsts[j] == k) {
                        return false;
                    }
                }
            }
        }
        if (!large.empty()) {
            std::sort(large.begin(), large.begin() + n_classes);
            return std::adjacent_find(large.begin(), large.begin() + n_classes) == large.begin() + n_classes;
        }
        return true;
    }

    // The same partition, each class numbered when first met (0, 1, 2...): the form
    // partition_holds reads.
    static std::vector<int> number_by_first_appearance(const std::vector<int> &classes) {
        std::vector<int> out;
        std::vector<int> given;  // given[n]: the class numbered n
        for (int c : classes) {
            auto it = std::find(given.begin(), given.end(), c);
            out.push_back(static_cast<int>(it - given.begin()));
            if (it == given.end()) {
                given.push_back(c);
            }
        }
        return out;
    }
};

}  // namespace pyframe

#endif  // PYFRAME_GUARD_ALIASING_H
