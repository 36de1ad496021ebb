// cuda-agent: <torch/types.h> for the tensor header's compile (worker/light_nvcc.py). `load_inline`
// writes `#include <torch/types.h>` at the top of every CUDA source it builds, ahead of the
// candidate's own `#include <torch/extension.h>`; here that line gets the tensor header as well, so
// that the unit is compiled with the tensor header alone rather than with both (which define
// torch's dtype names twice). A unit that uses what only the full <torch/types.h> declares does not
// compile with it, and is compiled with the next header.
#pragma once
#include <torch/extension.h>
