// What the hot path's parts share (hot_path.cpp, inplace.cpp): what it knows
// of an op, and running its kernel.
#pragma once

#include <torch/csrc/jit/python/pybind_utils.h>
#include <ATen/ATen.h>
#include <torch/csrc/utils/pybind.h>

#include "dualgen/kernel.h"

namespace dualgen {

namespace py = pybind11;

struct OpEntry {
  bool fast = false;  // a generated kernel the hot path may run
  JvpKernel kernel = nullptr;
  std::optional<c10::OperatorHandle> handle;
  std::vector<size_t> inputs;        // schema positions of differentiable inputs
  std::vector<bool> list_inputs;     // ... which are Tensor[]
  std::vector<bool> differentiable;  // per output
  py::object raw;                    // func._op: the op without OpOverload's frame
  std::string note;                  // added to an error the kernel raises
  bool view = false;                 // a view op: its tangent is the same view
  bool uses_outputs = false;         // its formula reads the op's outputs
  bool inplace = false;              // an in-place op updating self's tangent
  bool original_self = false;        // ... whose formula reads self as it was
  bool copy = false;                 // aten.copy_: reads its source as it writes
  bool is_view_op = false;           // the op returns views (func.is_view)
  bool detach = false;               // aten.detach: the mode notes no view of it
  bool collective = false;           // c10d / functional collectives: Python's (collectives/)
  // An in-place view op's out-of-place view (squeeze for squeeze_): what a
  // tangent batched by vmap becomes (inplace.batched_view_tangent).
  std::optional<c10::OperatorHandle> view_form;
  // Where autograd records it, in front (policy.front_when_recorded): the op
  // runs once, again on a node of its own for the formula, or goes to the mode.
  enum class Recorded { Once, Again, Mode } recorded = Recorded::Once;
};

// The kernel; an error it raises reaches Python as the Python kernel's would
// (torch's translation: the same type and message), with a note naming the op.
Results run_kernel(const OpEntry& op, const Values& primals, const Values& tangents,
                   const Values& outputs);

// A tangent of another shape than its output's is the rule's error, never
// broadcast into place.
void check_shape(const c10::FunctionSchema& schema, const at::Tensor& value,
                 const at::Tensor& output);

// The dispatch keys formulas (and an op autograd records) run with: the user's
// context's (tangents.autograd_enabled). Called from the front kernel
// (hot_path_front.cpp), where the mode is still on the stack, Python's keys stay out.
struct FormulaKeys {
  c10::DispatchKeySet included, excluded;
};
FormulaKeys formula_keys();

// The keys that reach a Python dispatch mode: excluded where the hot path runs
// an op or a formula that the mode must not see again.
inline const c10::DispatchKeySet python_keys{c10::DispatchKey::Python,
                                             c10::DispatchKey::PythonTLSSnapshot};

// Whether `pred` holds for a defined tensor among `values` (IValues: an op's
// arguments or tangents), lists' items included; stops at the first.
template <typename IValues, typename Pred>
bool any_tensor(const IValues& values, Pred&& pred) {
  auto holds = [&](const c10::IValue& v) {
    return v.isTensor() && v.toTensor().defined() && pred(v.toTensor());
  };
  for (const c10::IValue& value : values) {
    if (holds(value)) return true;
    if (value.isList()) {
      for (const c10::IValue& item : value.toListRef()) {
        if (holds(item)) return true;
      }
    }
  }
  return false;
}

// Whether this thread is inside the front kernel's call of the hot path.
extern thread_local bool in_front;

// A tensor subclass without a __torch_dispatch__ of its own (nn.Parameter)
// dispatches as a plain tensor (mode._dispatches_itself); known answers cached.
bool dispatches_plainly(const py::handle& type);

// forward_ad.make_dual's and unpack_dual's common cases (duals.cpp); SLOW
// where the Python path must make or unpack the dual.
py::object make_dual(const py::handle& tensor, const py::handle& tangent,
                     const py::handle& level);
py::object unpack_dual(const py::handle& tensor, const py::handle& level);

// The hot path for the front kernel (hot_path.cpp): the op `func` (its
// OpOverload) on its bound arguments. False: declined, nothing run, the stack
// as it was; true: run, its outputs on the stack.
bool dispatch_stack(const py::handle& func, torch::jit::Stack& stack);

// A tensor batched by torch's legacy vmap (hot_path.cpp): the high-level API's
// vectorized jacobians batch tangents so, one per batch element, without storage.
bool batched_by_legacy_vmap(const at::Tensor& t);

// A batched tangent laid out as the Python side lays it out (hot_path.cpp).
at::Tensor conform_batched(const at::Tensor& tangent, const at::Tensor& output, bool fresh);

// Whether an in-place op on `self` (its tangent `self_tangent`, maybe
// undefined) is the hot path's: otherwise the Python path's lens updates are
// needed (a view whose tangent lives on its base, elements sharing memory).
bool updates_plainly(const py::handle& self, const at::Tensor& self_tangent,
                     const Values& tangents, const py::handle& level);

// An in-place op, run and its tangent update made (inplace.py): `stack` holds
// the bound arguments, `tangents` the differentiable inputs' (self's first).
py::object update_in_place(const OpEntry& op, torch::jit::Stack& stack, Values& tangents,
                           const py::handle& self, const py::handle& level);

// An in-place view op (squeeze_, t_, ...) on self whose tangent is batched by
// legacy vmap, which cannot change a batched tensor's shape in place: the op
// run, and self given its view form of the tangent (mode._dispatch_at).
py::object update_batched_view(const OpEntry& op, torch::jit::Stack& stack,
                               const at::Tensor& self_tangent, const py::handle& self,
                               const py::handle& level, bool tracking);

}  // namespace dualgen
