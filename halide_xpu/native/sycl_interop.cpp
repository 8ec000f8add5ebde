// Native device binaries through SYCL backend interop (built with the SYCL headers of intel-sycl-rt, host code
// only; halide_xpu/target/sycl_native.py builds and loads it). The OpenCL and Level Zero entry points are
// resolved at run time (dlsym), so the library loads where either backend is missing.
//   hx_native_binary: the device binary of a built kernel bundle (OpenCL program binary; Level Zero module
//                     native binary), what a later process loads without invoking the device compiler.
//   hx_native_bundle: a kernel bundle from such a binary, for dpctl's DPCTLSyclKernelBundleRef users.
#include <dlfcn.h>

#include <CL/cl.h>
#include <level_zero/ze_api.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <sycl/ext/oneapi/backend/level_zero.hpp>
#include <sycl/sycl.hpp>
#include <vector>

namespace {

using Bundle = sycl::kernel_bundle<sycl::bundle_state::executable>;

void set_error(char *error, size_t size, const std::string &msg) {
  if (error && size) std::snprintf(error, size, "%s", msg.c_str());
}

void *resolve(const char *name) {
  void *fn = dlsym(RTLD_DEFAULT, name);
  if (fn) return fn;
  for (const char *lib : {"libOpenCL.so.1", "libze_loader.so.1"}) {
    void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen(lib, RTLD_NOW);
    if (h && (fn = dlsym(h, name))) return fn;
  }
  return nullptr;
}

template <typename F>
bool get(F *&slot, const char *name, char *error, size_t size) {
  slot = reinterpret_cast<F *>(resolve(name));
  if (!slot) set_error(error, size, std::string(name) + " not found (no OpenCL / Level Zero loader in the process)");
  return slot != nullptr;
}

int opencl_binary(const Bundle &kb, std::vector<unsigned char> &out, char *error, size_t esize) {
  decltype(&clGetProgramInfo) info;
  decltype(&clReleaseProgram) release;
  if (!get(info, "clGetProgramInfo", error, esize) || !get(release, "clReleaseProgram", error, esize)) return -2;
  std::vector<cl_program> programs = sycl::get_native<sycl::backend::opencl>(kb);
  int rc = 0;
  if (programs.size() != 1) {
    set_error(error, esize, "expected one OpenCL program in the bundle, got " + std::to_string(programs.size()));
    rc = -2;
  } else {
    size_t n = 0;
    cl_int err = info(programs[0], CL_PROGRAM_BINARY_SIZES, sizeof n, &n, nullptr);
    out.resize(n);
    unsigned char *p = out.data();
    if (err == CL_SUCCESS && n) err = info(programs[0], CL_PROGRAM_BINARIES, sizeof p, &p, nullptr);
    if (err != CL_SUCCESS || !n) {
      set_error(error, esize, "clGetProgramInfo(CL_PROGRAM_BINARIES) failed: " + std::to_string(err));
      rc = -2;
    }
  }
  for (cl_program p : programs) release(p);
  return rc;
}

int level_zero_binary(const Bundle &kb, std::vector<unsigned char> &out, char *error, size_t esize) {
  decltype(&zeModuleGetNativeBinary) native;
  if (!get(native, "zeModuleGetNativeBinary", error, esize)) return -2;
  std::vector<ze_module_handle_t> modules = sycl::get_native<sycl::backend::ext_oneapi_level_zero>(kb);
  if (modules.size() != 1) {
    set_error(error, esize, "expected one Level Zero module in the bundle, got " + std::to_string(modules.size()));
    return -2;
  }
  size_t n = 0;
  ze_result_t r = native(modules[0], &n, nullptr);
  out.resize(n);
  if (r == ZE_RESULT_SUCCESS && n) r = native(modules[0], &n, out.data());
  if (r != ZE_RESULT_SUCCESS || !n) {
    set_error(error, esize, "zeModuleGetNativeBinary failed: 0x" + std::to_string(unsigned(r)));
    return -2;
  }
  return 0;
}

Bundle *opencl_bundle(const sycl::context &ctx, const sycl::device &dev, const unsigned char *bin, size_t n,
                      const char *options, char *error, size_t esize) {
  decltype(&clCreateProgramWithBinary) create;
  decltype(&clBuildProgram) build;
  decltype(&clReleaseProgram) release;
  decltype(&clReleaseContext) release_context;
  decltype(&clReleaseDevice) release_device;
  if (!get(create, "clCreateProgramWithBinary", error, esize) || !get(build, "clBuildProgram", error, esize) ||
      !get(release, "clReleaseProgram", error, esize) || !get(release_context, "clReleaseContext", error, esize) ||
      !get(release_device, "clReleaseDevice", error, esize))
    return nullptr;
  cl_context c = sycl::get_native<sycl::backend::opencl>(ctx);
  cl_device_id d = sycl::get_native<sycl::backend::opencl>(dev);
  cl_int status = CL_SUCCESS, err = CL_SUCCESS;
  cl_program p = create(c, 1, &d, &n, &bin, &status, &err);
  if (err == CL_SUCCESS && status == CL_SUCCESS) err = build(p, 1, &d, options, nullptr, nullptr);
  Bundle *kb = nullptr;
  if (err == CL_SUCCESS && status == CL_SUCCESS) {
    kb = new Bundle(sycl::make_kernel_bundle<sycl::backend::opencl, sycl::bundle_state::executable>(p, ctx));
  } else {
    set_error(error, esize, "clCreateProgramWithBinary/clBuildProgram: " + std::to_string(err) + "/" +
                                std::to_string(status));
  }
  if (p) release(p);
  release_context(c);
  release_device(d);
  return kb;
}

Bundle *level_zero_bundle(const sycl::context &ctx, const sycl::device &dev, const unsigned char *bin, size_t n,
                          const char *options, char *error, size_t esize) {
  decltype(&zeModuleCreate) create;
  if (!get(create, "zeModuleCreate", error, esize)) return nullptr;
  ze_context_handle_t c = sycl::get_native<sycl::backend::ext_oneapi_level_zero>(ctx);
  ze_device_handle_t d = sycl::get_native<sycl::backend::ext_oneapi_level_zero>(dev);
  ze_module_desc_t desc = {};
  desc.stype = ZE_STRUCTURE_TYPE_MODULE_DESC;
  desc.format = ZE_MODULE_FORMAT_NATIVE;
  desc.inputSize = n;
  desc.pInputModule = bin;
  desc.pBuildFlags = options;
  ze_module_handle_t module = nullptr;
  ze_result_t r = create(c, d, &desc, &module, nullptr);
  if (r != ZE_RESULT_SUCCESS) {
    set_error(error, esize, "zeModuleCreate(native) failed: " + std::to_string(unsigned(r)));
    return nullptr;
  }
  return new Bundle(sycl::make_kernel_bundle<sycl::backend::ext_oneapi_level_zero, sycl::bundle_state::executable>(
      {module, sycl::ext::oneapi::level_zero::ownership::transfer}, ctx));
}

}  // namespace

extern "C" {

// The device binary of `bundle` (a sycl::kernel_bundle<executable>*, dpctl's DPCTLSyclKernelBundleRef) into `out`
// when `capacity` suffices; `*size` is its size. 0: done; -1: the backend offers no binary; -2: error (message).
int hx_native_binary(void *bundle, unsigned char *out, size_t capacity, size_t *size, char *error, size_t esize) {
  try {
    const Bundle &kb = *static_cast<Bundle *>(bundle);
    std::vector<unsigned char> bytes;
    int rc = -1;
    if (kb.get_backend() == sycl::backend::opencl) rc = opencl_binary(kb, bytes, error, esize);
    else if (kb.get_backend() == sycl::backend::ext_oneapi_level_zero) rc = level_zero_binary(kb, bytes, error, esize);
    else set_error(error, esize, "this SYCL backend offers no device binary");
    if (rc) return rc;
    *size = bytes.size();
    if (out && capacity >= bytes.size()) std::memcpy(out, bytes.data(), bytes.size());
    return 0;
  } catch (const std::exception &e) {
    set_error(error, esize, e.what());
    return -2;
  }
}

// A kernel bundle (new sycl::kernel_bundle<executable>*, owned by the caller) from a device binary of `device` in
// `context` (sycl::context*, sycl::device*), built with `options`; nullptr with a message in `error` if refused.
void *hx_native_bundle(void *context, void *device, const unsigned char *binary, size_t size, const char *options,
                       char *error, size_t esize) {
  try {
    const sycl::context &ctx = *static_cast<sycl::context *>(context);
    const sycl::device &dev = *static_cast<sycl::device *>(device);
    if (ctx.get_backend() == sycl::backend::opencl) return opencl_bundle(ctx, dev, binary, size, options, error, esize);
    if (ctx.get_backend() == sycl::backend::ext_oneapi_level_zero)
      return level_zero_bundle(ctx, dev, binary, size, options, error, esize);
    set_error(error, esize, "this SYCL backend takes no device binary");
  } catch (const std::exception &e) {
    set_error(error, esize, e.what());
  }
  return nullptr;
}

// Intel's PCI device id of `device` (what `ocloc -device` takes), or 0 where the runtime does not report one.
unsigned hx_device_id(void *device) {
  try {
    const sycl::device &dev = *static_cast<sycl::device *>(device);
    if (dev.has(sycl::aspect::ext_intel_device_id)) return dev.get_info<sycl::ext::intel::info::device::device_id>();
  } catch (const std::exception &) {
  }
  return 0;
}

}  // extern "C"
