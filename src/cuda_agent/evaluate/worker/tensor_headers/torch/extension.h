// cuda-agent: the first header tried in place of <torch/extension.h> for a candidate's CUDA unit
// (worker/light_nvcc.py). It declares at::Tensor with its methods and operators, TensorOptions,
// AT_DISPATCH, TORCH_CHECK, device guards and torch's factory functions (torch::empty, zeros, ones,
// full, *_like, ...), without the declarations of ATen's ~2,000 other operators that <torch/types.h>
// brings in: nvcc parses it in about two thirds of the time. A unit that uses anything else (torch::matmul,
// torch::indexing, pybind11, ...) does not compile with it and is compiled again with the next
// header, <torch/types.h>, then as written. Every declaration here is torch's own, from the headers the
// full one includes too, so a unit that compiles with it calls what it would have called with them.
#pragma once
#ifndef AT_PER_OPERATOR_HEADERS  // one header per operator: variable_factories.h then includes the factories' only
#define AT_PER_OPERATOR_HEADERS
#define CUDA_AGENT_PER_OPERATOR_HEADERS
#endif
#include <ATen/core/Tensor.h>
#include <ATen/Device.h>
#include <ATen/DeviceGuard.h>
#include <ATen/Dispatch.h>
#include <ATen/TensorOperators.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/generated/variable_factories.h>
#ifdef CUDA_AGENT_PER_OPERATOR_HEADERS  // headers the unit includes itself see the macro as it was
#undef AT_PER_OPERATOR_HEADERS
#undef CUDA_AGENT_PER_OPERATOR_HEADERS
#endif

// The names <torch/types.h> adds to namespace torch. (In this compile <torch/types.h>, which
// `load_inline` puts first in every CUDA source, is this folder's: this header again.)
namespace torch {
using namespace at;
#if !defined(FBCODE_CAFFE2) && !defined(C10_NODEPRECATED)
using std::nullopt;
using std::optional;
#endif
using Dtype = at::ScalarType;
constexpr auto kUInt8 = at::kByte;
constexpr auto kInt8 = at::kChar;
constexpr auto kInt16 = at::kShort;
constexpr auto kInt32 = at::kInt;
constexpr auto kInt64 = at::kLong;
constexpr auto kUInt16 = at::kUInt16;
constexpr auto kUInt32 = at::kUInt32;
constexpr auto kUInt64 = at::kUInt64;
constexpr auto kFloat16 = at::kHalf;
constexpr auto kFloat32 = at::kFloat;
constexpr auto kFloat64 = at::kDouble;
constexpr auto kU8 = kUInt8;
constexpr auto kU16 = kUInt16;
constexpr auto kU32 = kUInt32;
constexpr auto kU64 = kUInt64;
constexpr auto kI8 = kInt8;
constexpr auto kI16 = kInt16;
constexpr auto kI32 = kInt32;
constexpr auto kI64 = kInt64;
constexpr auto kF16 = kFloat16;
constexpr auto kF32 = kFloat32;
constexpr auto kF64 = kFloat64;
}  // namespace torch
