// binding.cpp -- fixed file of the cuda-agent workspace. Do not edit: the evaluator builds with its
// own copy and ignores this one. It creates the Python module `cuda_extension` from every binding
// registered with REGISTER_BINDING in kernels/*_binding.cpp.
#include <pybind11/pybind11.h>

#include "binding_registry.h"

PYBIND11_MODULE(cuda_extension, m) {
  m.doc() = "Kernels of this workspace, registered through binding_registry.h";
  BindingRegistry::getInstance().applyBindings(m);
}
