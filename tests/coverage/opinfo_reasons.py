"""Why a swept (op, dtype) may not match native: the reasons opinfo_sweep.py writes
into the known table (opinfo_known.py names them, so each is written once)."""

TRIANGLE = (
    "native wrong: its JVP uses the whole tangent of the factor, not the triangle "
    "the op reads; dualgen agrees with finite differences (dualgen validate)"
)
CHOLESKY_INVERSE = (
    "native wrong: its JVP differs from finite differences even for a triangular "
    "tangent; dualgen agrees with them"
)
SAVED_LU = (
    "native wrong: the LU factorization its forward saves carries no tangent in "
    "native forward AD, so the backward's tangent misses its share; dualgen's equals "
    "reverse over reverse (tests/runtime/test_nested_normalization_linalg.py)"
)
LOGCUMSUMEXP_BIAS = (
    "native wrong: it adds 1e-13 after rescaling by the maximum, which biases small "
    "prefix sums; dualgen agrees with finite differences"
)
LOGCUMSUMEXP_BIAS_HVP = "native wrong: the same 1e-13 bias as its forward AD"
LOGCUMSUMEXP_OVERFLOW = (
    "native wrong: its tangent overflows to NaN (x = [800+0j, 1+0j]); dualgen "
    "agrees with finite differences"
)
MASKED_PROD_NAN = (
    "native wrong: at a NaN input the gradient of a product is the (finite) product "
    "of the other elements; native divides the product by the input (NaN), while "
    "under a dispatch mode torch's prod_backward takes its exact exclusive-product "
    "path"
)
ADDR_NAN = (
    "NaN semantics: with alpha = 0 and NaN vectors native's tangent of vec1's "
    "gradient is NaN (it multiplies the cotangent's materialised zero tangent by "
    "the NaN vector); dualgen has no such term and gives alpha times the tangent's "
    "product, 0"
)
PROD_ZEROS = (
    "native wrong: with two or more zeros native forward-over-reverse gives no "
    "tangent; dualgen's equals torch.func.jvp of torch.func.grad and finite "
    "differences of the gradient"
)
# What a program of values cannot express (docs/fx.md).
READS_VALUE = (
    "reads a tensor's value while traced (torch.equal, .item()): a program cannot "
    "depend on values, so dualgen.fx.jvp stops with make_fx's error"
)
DETACHED_ALIAS = (
    "updates its input through a detached alias (max_norm's renormalisation): "
    "refused, a program of values cannot tell whether native keeps the tangent "
    "(it does here)"
)
AS_STRIDED_BASE = (
    "as_strided reads memory outside its input's view, in the view's base: a "
    "program of values has no base (native reads the base's tangent there, zeros)"
)

DROPPED_WEIGHT = (
    "native wrong: its forward formula takes the class weights as constants, so "
    "their tangent gives no share, with no error; dualgen's equals central "
    "differences (tests/runtime/test_loss_weight_tangents.py)"
)

# (op, variant, dtype, "hvp" or "jvp") where native is wrong and dualgen right,
# with the evidence (the fx sweep falls back to the "jvp" row).
NATIVE_WRONG = {
    **{
        (op, "", "float64", "jvp"): DROPPED_WEIGHT
        for op in (
            "nn.functional.nll_loss",
            "nn.functional.cross_entropy",
            "nn.functional.linear_cross_entropy",
        )
    },
    **{
        (op, "", dtype, mode): TRIANGLE
        for op in ("cholesky_solve", "triangular_solve")
        for dtype, mode in (
            ("float64", "jvp"),
            ("complex128", "jvp"),
            ("float64", "hvp"),
        )
    },
    **{
        ("cholesky_inverse", "", dtype, mode): CHOLESKY_INVERSE
        for dtype, mode in (
            ("float64", "jvp"),
            ("complex128", "jvp"),
            ("float64", "hvp"),
        )
    },
    **{
        (op, "", "float64", "hvp"): SAVED_LU
        for op in (
            "logdet",
            "linalg.det",
            "linalg.slogdet",
            "linalg.solve",
            "linalg.solve_ex",
            "linalg.tensorsolve",
        )
    },
    ("logcumsumexp", "", "float64", "hvp"): LOGCUMSUMEXP_BIAS_HVP,
    ("masked.prod", "", "float64", "hvp"): MASKED_PROD_NAN,
    ("addr", "", "float64", "hvp"): ADDR_NAN,
    ("prod", "", "float64", "hvp"): PROD_ZEROS,
    ("logcumsumexp", "", "float64", "jvp"): LOGCUMSUMEXP_BIAS,
    ("logcumsumexp", "", "complex128", "jvp"): LOGCUMSUMEXP_OVERFLOW,
}

# Failure pattern or (name, variant) -> why the fx sweep's program cannot match.
FX_LIMITS = {
    "data-dependent|value out of a tracing tensor": READS_VALUE,
    "detached alias": DETACHED_ALIAS,
    ("as_strided", "partial_views"): AS_STRIDED_BASE,
}
