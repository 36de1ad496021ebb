// binding_registry.h -- fixed file of the cuda-agent workspace. Do not edit: the evaluator builds with
// its own copy and ignores this one.
//
// Each kernels/*_binding.cpp registers a function that adds its ops to the Python module:
//
//     static void register_my_op(pybind11::module& m) { m.def("my_op_forward", &my_op_forward); }
//     REGISTER_BINDING(my_op, register_my_op);
//
// binding.cpp then builds one module, `cuda_extension`, holding every registered op.
// Only pybind11 is included here (not torch/extension.h) so that binding.cpp compiles in seconds.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

// Hidden visibility: pybind11 builds the module with -fvisibility=hidden, and a class holding
// pybind11 types must match it or GCC warns in every file that includes this header.
#if defined(__GNUC__)
#define CUDA_AGENT_HIDDEN __attribute__((visibility("hidden")))
#else
#define CUDA_AGENT_HIDDEN
#endif

class CUDA_AGENT_HIDDEN BindingRegistry {
 public:
  using BindingFunction = std::function<void(pybind11::module&)>;

  static BindingRegistry& getInstance() {
    static BindingRegistry registry;
    return registry;
  }

  void registerBinding(const std::string& name, BindingFunction fn) {
    entries_.emplace_back(name, std::move(fn));
  }

  void applyBindings(pybind11::module& m) const {
    for (const auto& entry : entries_) entry.second(m);
  }

 private:
  BindingRegistry() = default;
  std::vector<std::pair<std::string, BindingFunction>> entries_;
};

class CUDA_AGENT_HIDDEN BindingRegistrar {
 public:
  BindingRegistrar(const std::string& name, BindingRegistry::BindingFunction fn) {
    BindingRegistry::getInstance().registerBinding(name, std::move(fn));
  }
};

// Registers `fn` (callable as fn(pybind11::module&)) under `name`, which must be unique in the build.
#define REGISTER_BINDING(name, fn)                                   \
  static BindingRegistrar cuda_agent_binding_registrar_##name(       \
      #name, [](pybind11::module& m) { fn(m); })
