// Shared state of the USM device runtime (usm_device.cpp, usm_memory.cpp, usm_programs.cpp, usm_launch.cpp):
// dpctl's C entry points, queue records, allocations, programs, and the counters Python reads.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "HalideRuntime.h"

extern "C" {
// Layout of Halide's per-API table (src/runtime/device_interface.h); HalideRuntime.h only declares it.
struct halide_device_interface_impl_t {
  void (*use_module)();
  void (*release_module)();
  int (*device_malloc)(void *, halide_buffer_t *);
  int (*device_free)(void *, halide_buffer_t *);
  int (*device_sync)(void *, halide_buffer_t *);
  int (*device_release)(void *);
  int (*copy_to_host)(void *, halide_buffer_t *);
  int (*copy_to_device)(void *, halide_buffer_t *);
  int (*device_and_host_malloc)(void *, halide_buffer_t *);
  int (*device_and_host_free)(void *, halide_buffer_t *);
  int (*buffer_copy)(void *, halide_buffer_t *, const halide_device_interface_t *, halide_buffer_t *);
  int (*device_crop)(void *, const halide_buffer_t *, halide_buffer_t *);
  int (*device_slice)(void *, const halide_buffer_t *, int, int, halide_buffer_t *);
  int (*device_release_crop)(void *, halide_buffer_t *);
  int (*wrap_native)(void *, halide_buffer_t *, uint64_t);
  int (*detach_native)(void *, halide_buffer_t *);
};
int halide_device_and_host_malloc(void *, halide_buffer_t *, const halide_device_interface_t *);
int halide_device_and_host_free(void *, halide_buffer_t *);
int hx_local_bytes(int bytes);
}

namespace hx_usm {

typedef void *Ref;  // dpctl's opaque refs (sycl::queue*, sycl::context*, ...)

// dpctl enums (dpctl_sycl_enum_types.h)
enum ArgType { kInt8 = 0, kInt16 = 2, kInt32 = 4, kInt64 = 6, kVoidPtr = 10, kLocalAccessor = 11 };
enum UsmType { kUsmUnknown = 0, kUsmDevice = 1, kUsmShared = 2, kUsmHost = 3 };
enum Backend { kLevelZero = 1 << 17, kOpenCL = 1 << 18 };

struct LocalAccessor {  // dpctl's MDLocalAccessor
  size_t ndim;
  int type;
  size_t dim0, dim1, dim2;
};

struct Api {
  Ref (*queue_copy)(Ref);
  Ref (*queue_get_context)(Ref);
  Ref (*queue_get_device)(Ref);
  bool (*queue_is_in_order)(Ref);
  size_t (*queue_hash)(Ref);
  int (*queue_backend)(Ref);
  void (*queue_wait)(Ref);
  Ref (*queue_memcpy)(Ref, void *, const void *, size_t);
  Ref (*submit)(Ref, Ref, void **, const int *, size_t, const size_t *, const size_t *, size_t, const Ref *, size_t);
  Ref (*bundle_from_source)(Ref, Ref, const char *, const char *);
  Ref (*bundle_from_spirv)(Ref, Ref, const void *, size_t, const char *);
  Ref (*bundle_get_kernel)(Ref, const char *);
  int (*pointer_type)(const void *, Ref);
  void *(*malloc_device)(size_t, Ref);
  void *(*malloc_shared)(size_t, Ref);
  void (*free_with_queue)(void *, Ref);
  void (*event_delete)(Ref);
  void (*context_delete)(Ref);
  void (*device_delete)(Ref);
  size_t (*context_hash)(Ref);
  size_t (*device_hash)(Ref);
  size_t (*device_max_wg)(Ref);
  size_t (*kernel_max_wg)(Ref);
  size_t (*kernel_num_args)(Ref);
};

// A native device binary -> kernel bundle (sycl_interop.cpp's hx_native_bundle, set by Python): nullptr and a
// message in `error` when the device refuses it.
typedef Ref (*NativeLoader)(Ref context, Ref device, const uint8_t *binary, size_t size, const char *options,
                            char *error, size_t error_size);

struct QueueInfo {
  Ref owned = nullptr;  // our copy of the queue: waits and frees stay valid after the caller's queue is gone
  size_t hash = 0;
  Ref context = nullptr, device = nullptr;
  size_t context_key = 0, device_key = 0, max_wg = 0;
  bool in_order = false;
  std::multimap<size_t, void *> pool;  // freed intermediates, reused on this (in-order) queue only
  size_t pooled = 0;
};

struct Allocation {
  Ref queue;  // the caller's queue pointer (key of `queues`)
  size_t size;
  Ref owned;  // our copy of that queue, for waits and frees
};

struct Kernel {
  Ref ref;
  size_t num_args;  // Halide's arguments, plus one when the kernel still takes the shared-memory argument
  size_t max_wg;
};

struct Module {  // Halide's per-pipeline kernel state
  std::string source;
  std::map<std::pair<size_t, size_t>, Ref> bundles;  // (context, device) -> kernel bundle
  std::map<std::pair<Ref, const char *>, Kernel> kernels;  // entry names are constants of the kernel object
};

struct Binary {  // a device binary built ahead of launch (halide_xpu/device_binary.py)
  std::vector<uint8_t> data;
  std::string options;  // build options given to the device's compiler / loader
};

extern Api api;
extern bool api_ready;
extern std::mutex lock;  // guards everything below
extern std::string init_error;
extern std::atomic<uint64_t> n_launches, n_to_host, n_to_device, n_mallocs, n_frees, n_builds;
extern std::atomic<uint64_t> n_binary_loads, n_binary_rejects, n_native_loads, n_native_rejects;
// Keyed by the prepared OpenCL C they came from.
extern std::map<std::string, Binary> spirv_modules, native_binaries;
extern NativeLoader native_loader;
extern int sub_group_size;  // intel_reqd_sub_group_size for every kernel; 0 leaves it to the compiler
extern size_t pool_limit;
extern std::unordered_map<Ref, QueueInfo> queues;
extern std::vector<QueueInfo> retired;  // records of destroyed queues whose pools are released at exit
extern std::unordered_map<void *, Allocation> allocations;  // USM memory this module allocated

void report(void *uc, const std::string &msg);
QueueInfo *queue_info(void *uc);  // call with `lock` held
void release_pool(QueueInfo &q);
int release_all(void *uc);
const halide_device_interface_t *iface();
std::string prepare_source(const std::string &src, int sub_group);
Ref bundle_for(void *uc, Module *m, QueueInfo *q);

}  // namespace hx_usm
