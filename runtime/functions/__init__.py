"""Custom `torch.autograd.Function`s under dual levels, as native forward AD runs them.

Native forward AD never looks inside a Function: it runs `forward` with forward
grad off and takes the outputs' tangents from the user's `jvp(ctx, *tangents)`.
The dispatch mode alone would instead differentiate the aten ops inside `forward`
(a straight-through `round` would get tangent 0), so while any level is active
`Function.apply` reaches `_apply`: it is installed as `_SingleLevelFunction.apply`,
which `Function.apply` calls through `super().apply` once it has bound
setup_context's defaults (so `my_fn = MyFunction.apply`, bound before any level
was entered, is covered too), in place of the C++ `_FunctionBase.apply`:

* it finds the innermost level L at which some input has a tangent, computes the
  primal with only the levels below L handled (recursively: each lower level with
  tangents also goes through `jvp`; at the bottom `forward` runs with no level
  handled), then calls `jvp` with the mode handling the levels below L, so outer
  levels differentiate it (higher order derivatives), and attaches what it returns
  at L after native's checks (in-place, view, non-differentiable outputs);
* `jvp` gets what native gives it: one tangent per input, zeros for a tensor
  input without one (unless `ctx.set_materialize_grads(False)`), None for the
  other arguments;
* the `ctx` that the C++ `_FunctionBase.apply` creates is caught in
  `BackwardCFunction.__init__`, and what `forward`/`setup_context` save or mark
  on it is recorded (C++ clears those fields before apply returns);
* a Function without `jvp` gets one derived from its `backward`, which is linear
  in its grad arguments: J t is the gradient, with respect to dummy grad_outputs v,
  of <backward(ctx, *v), t> (the double-backward trick). Where that cannot work the
  error names the Function and the fixes: a `jvp`, or `dualgen.register_jvp(cls)`.

The same hook serves the reverse tape of the gradcheck harness (`dualgen.harness.tape`):
while a tape records, each Function call that it differentiates becomes one step,
run backwards by the Function's own `backward`/`vjp` (`backward.py`).

torch.utils.checkpoint's reentrant Function runs its function directly while a
level is active or a tape records. Everything is installed when the first level is
entered or the first tape starts recording, and removed when the last one is done
(`install`/`uninstall`, from `dualgen.forward_ad` and `Tape`).
"""

from .hooks import install, uninstall
from .user_rules import register_function_jvp, unregister_function_jvp

__all__ = ["install", "register_function_jvp", "uninstall", "unregister_function_jvp"]
