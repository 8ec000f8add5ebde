// Programs of the Halide device API over SYCL: Halide's OpenCL C prepared for the device, and kernel bundles made
// from a native binary, a SPIR-V module (both built ahead of launch by halide_xpu/device_binary.py) or the source.
#include <cstdio>

#include "usm_state.h"

namespace hx_usm {
namespace {

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + what.size())) n++;
  return n;
}

std::string replace_all(const std::string &text, const std::string &from, const std::string &to) {
  std::string out;
  size_t pos = 0, hit;
  while ((hit = text.find(from, pos)) != std::string::npos) {
    out.append(text, pos, hit - pos);
    out += to;
    pos = hit + from.size();
  }
  out.append(text, pos, std::string::npos);
  return out;
}

}  // namespace

// Halide's OpenCL source, adapted: every kernel gets the device's sub-group size, and the trailing dynamic
// shared-memory parameter is dropped where no kernel uses it (a local-memory argument costs ~5 us per
// submit on the CPU runtime). hx_usm_run passes that argument only to kernels that still declare it.
std::string prepare_source(const std::string &src, int sub_group) {
  const std::string unused_shared = ",\n __local int16* __shared)";
  std::string out = src;
  if (count(out, unused_shared) == count(out, "__shared")) out = replace_all(out, unused_shared, ")");
  if (sub_group) {
    out = replace_all(out, "__kernel void ",
                      "__kernel __attribute__((intel_reqd_sub_group_size(" + std::to_string(sub_group) + "))) void ");
  }
  return out;
}

// A native binary, else a SPIR-V module, else the OpenCL C source; a binary the device refuses is reported on
// stderr and the next form is tried.
Ref bundle_for(void *uc, Module *m, QueueInfo *q) {
  auto key = std::make_pair(q->context_key, q->device_key);
  auto it = m->bundles.find(key);
  if (it != m->bundles.end()) return it->second;
  int backend = api.queue_backend(uc);
  std::string src = prepare_source(m->source, sub_group_size);
  Ref kb = nullptr;
  auto native = native_binaries.find(src);
  if (native != native_binaries.end() && native_loader) {
    char error[512] = "";
    const Binary &b = native->second;
    kb = native_loader(q->context, q->device, b.data.data(), b.data.size(), b.options.c_str(), error, sizeof error);
    if (kb) {
      n_native_loads++;
    } else {
      n_native_rejects++;
      std::fprintf(stderr, "halide_xpu usm: the SYCL device refused a native binary (%s); loading the next format\n",
                   error);
    }
  }
  auto spv = spirv_modules.find(src);
  if (!kb && spv != spirv_modules.end()) {  // if the device refuses the module, build the source
    const Binary &b = spv->second;
    kb = api.bundle_from_spirv(q->context, q->device, b.data.data(), b.data.size(), b.options.c_str());
    if (kb) {
      n_binary_loads++;
    } else {
      n_binary_rejects++;
      std::fprintf(stderr, "halide_xpu usm: the SYCL device refused a SPIR-V module; building its OpenCL C source\n");
    }
  }
  if (!kb) kb = api.bundle_from_source(q->context, q->device, src.c_str(), "");
  if (!kb) {
    report(uc, std::string("building the OpenCL C program failed on this SYCL device") +
                   (backend == kLevelZero ? " (Level Zero queue: dpctl needs ocloc for OpenCL C sources)" : "") +
                   "; set HALIDE_XPU_DUMP_STMT=1 to keep the kernel source");
    return nullptr;
  }
  n_builds++;
  m->bundles[key] = kb;
  return kb;
}

}  // namespace hx_usm

using namespace hx_usm;

extern "C" {

// The OpenCL C that bundle_for builds (or looks up SPIR-V for) from Halide's source `src`, for `sub_group`:
// the one definition of those edits, used ahead of launch by halide_xpu/device_binary.py. Valid until the
// calling thread's next call.
const char *hx_usm_prepare_source(const char *src, int sub_group) {
  thread_local std::string out;
  out = prepare_source(src, sub_group);
  return out.c_str();
}

// Registers a device binary built from the prepared OpenCL C `src` (kind 0: SPIR-V, 1: native) with the build
// options its loader takes; kernel objects with that source load it instead of building the source (programs
// already made stay as they are); size 0 forgets it.
void hx_usm_set_binary(int kind, const char *src, const uint8_t *data, size_t size, const char *options) {
  std::lock_guard<std::mutex> g(lock);
  auto &registry = kind == 1 ? native_binaries : spirv_modules;
  if (size) registry[src] = Binary{std::vector<uint8_t>(data, data + size), options ? options : ""};
  else registry.erase(src);
}

// The function that makes a kernel bundle from a native binary (sycl_interop.cpp); nullptr: none.
void hx_usm_set_native_loader(void *loader) {
  std::lock_guard<std::mutex> g(lock);
  native_loader = reinterpret_cast<NativeLoader>(loader);
}

// ------------------------------------------------------------------ the halide_opencl_* replacements
int hx_usm_initialize_kernels(void *uc, void **state_ptr, const char *src, int size) {
  std::lock_guard<std::mutex> g(lock);
  QueueInfo *q = queue_info(uc);
  if (!q) return halide_error_code_generic_error;
  if (!*state_ptr) {
    Module *m = new Module();
    m->source.assign(src, size > 0 && src[size - 1] == 0 ? size - 1 : size);
    *state_ptr = m;
  }
  return bundle_for(uc, static_cast<Module *>(*state_ptr), q) ? 0 : halide_error_code_generic_error;
}

void hx_usm_finalize_kernels(void *, void *) {}  // programs stay cached for the process

}  // extern "C"
