// A no-op device guard for CUDA, registered in a CPU-only build of torch so that tensors whose
// device says "cuda" (tests.kit.cuda_emu's wrappers, their data on the CPU) pass the device
// guards that torch's Python bindings put around indexing, copies and attention. It is
// c10's own FakeGuardImpl; nothing here runs a kernel.
#include <Python.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/FakeGuardImpl.h>

namespace {
C10_REGISTER_GUARD_IMPL(CUDA, c10::impl::FakeGuardImpl<c10::DeviceType::CUDA>);
}

static PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "cuda_emu_guard", nullptr, -1, nullptr};
PyMODINIT_FUNC PyInit_cuda_emu_guard(void) { return PyModule_Create(&module_def); }
