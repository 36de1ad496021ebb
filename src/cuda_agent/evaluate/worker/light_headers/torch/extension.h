// cuda-agent: a candidate's CUDA unit that includes <torch/extension.h> is compiled first with this
// header in its place (worker/light_nvcc.py): torch's tensor API, <torch/types.h>, which torch/all.h
// includes too, without the rest of libtorch's C++ frontend and Python/pybind11, which nvcc would
// parse three times over. A unit that does not compile so is compiled again as its author wrote it.
#pragma once
#include <torch/types.h>
