"""Helpers that derivative formulas may call by name (the spec's one helper module).

Every public helper is listed in `__all__`; the generator checks formula calls
against that list, and generated kernels import what they use
(`from dualgen.formulas import ...`). Each helper is a plain function of tensors
and Python values, linear in any tangent it receives.

Helpers that are tensor math are written once, in helpers/<family>.yaml, and
generated (Python: dualgen.generated.helpers; C++: generated/cpp/helpers.cpp).
The others live in one module per family of ops, each with its own `__all__`,
their C++ twins hand-written (runtime/csrc/dualgen/formulas/twins.yaml lists
them). This package re-exports them all:

- (`dualgen.helper_basics`, outside this package: utilities one-source helpers
  may call, a leaf module; not formula vocabulary, so not re-exported)
- `elementwise`: element-wise ops, and the general helpers (scale, unbroadcast,
  as_real_like, conform, ...) the other families and generated kernels use
- `reductions`: reductions, scans and sorts
- `shapes`: shape, view and indexing ops
- `nn`: normalization, losses, dropout, bilinear
- `fft`: FFT ops
- `linalg_decompositions`: SVD, eig, eigh, QR, pinv, lstsq
- `linalg_solves`: solves, Cholesky, determinants, LU, matrix_exp, Householder
- `backward_ops`: the formulas of backward ops (forward-over-reverse)
- `attention`: fused attention kernels (CPU flash attention and its backward, the
  device kernels behind scaled_dot_product_attention)
- `attention_lower`: the lower attention kernels libraries call directly (varlen)
  and their backward kernels
- `attention_varlen`: torch's own varlen attention custom ops (torch_attn::), whose
  rules are generated from specs/torch_custom_ops.yaml (Python only)
- `transformer`: the inference fast paths of nn.MultiheadAttention and
  nn.TransformerEncoderLayer (_native_multi_head_attention,
  _transformer_encoder_layer_fwd)
- `recurrent`: fused recurrent layers (mkldnn_rnn_layer)
- `cudnn_rnn`: cuDNN's whole recurrent stack (_cudnn_rnn: nn.RNN, nn.LSTM and
  nn.GRU on CUDA)
- `fused_nn`: other fused nn kernels (grid sampling, embedding bags, CTC, cdist,
  grouped matmul)
- `quantization`: learnable fake quantization (quantization-aware training)
"""

from __future__ import annotations

from dualgen.generated import helpers as one_source
from dualgen.generated.helpers import *

from . import (
    attention,
    attention_lower,
    attention_varlen,
    backward_ops,
    cudnn_rnn,
    elementwise,
    fft,
    fused_nn,
    linalg_decompositions,
    linalg_solves,
    nn,
    quantization,
    recurrent,
    reductions,
    shapes,
    transformer,
)
from .attention import *
from .attention_lower import *
from .attention_varlen import *
from .backward_ops import *
from .cudnn_rnn import *
from .elementwise import *
from .fft import *
from .fused_nn import *
from .linalg_decompositions import *
from .linalg_solves import *
from .nn import *
from .quantization import *
from .recurrent import *
from .reductions import *
from .shapes import *
from .transformer import *

__all__ = (
    one_source.__all__
    + elementwise.__all__
    + reductions.__all__
    + shapes.__all__
    + nn.__all__
    + fft.__all__
    + linalg_decompositions.__all__
    + linalg_solves.__all__
    + backward_ops.__all__
    + attention.__all__
    + attention_lower.__all__
    + attention_varlen.__all__
    + transformer.__all__
    + recurrent.__all__
    + cudnn_rnn.__all__
    + fused_nn.__all__
    + quantization.__all__
)
__all__.sort()
