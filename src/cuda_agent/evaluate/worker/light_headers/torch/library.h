// cuda-agent: in the light compile of a CUDA unit (worker/light_nvcc.py) this empty file stands
// in for torch's operator-registration API (TORCH_LIBRARY, torch::Library), which <torch/types.h>
// includes and which none of the corpus's 700 model-written CUDA units uses: without it cudafe++
// and cicc each parse about a second less of a unit. A unit that uses it, or includes a header
// that does, does not compile so and is compiled again as its author wrote it.
#pragma once
