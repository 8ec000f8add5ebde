// Kernel launch of the Halide device API over SYCL: hx_usm_run, the replacement of halide_opencl_run.
#include <cstdio>

#include "usm_state.h"

using namespace hx_usm;

extern "C" {

int hx_usm_run(void *uc, void *state_ptr, const char *entry, int bx, int by, int bz, int tx, int ty, int tz,
               int shared_mem_bytes, size_t arg_sizes[], void *args[], int8_t arg_is_buffer[]) {
  std::unique_lock<std::mutex> g(lock);
  QueueInfo *q = queue_info(uc);
  if (!q) return halide_error_code_device_run_failed;
  Module *m = static_cast<Module *>(state_ptr);
  Ref kb = bundle_for(uc, m, q);
  if (!kb) return halide_error_code_device_run_failed;
  auto kkey = std::make_pair(kb, entry);
  auto kit = m->kernels.find(kkey);
  if (kit == m->kernels.end()) {
    Ref ref = api.bundle_get_kernel(kb, entry);
    if (!ref) {
      report(uc, std::string("kernel ") + entry + " not found in its program");
      return halide_error_code_device_run_failed;
    }
    kit = m->kernels.emplace(kkey, Kernel{ref, api.kernel_num_args(ref), api.kernel_max_wg(ref)}).first;
  }
  const Kernel kernel = kit->second;
  size_t wg = size_t(tx) * ty * tz;
  size_t limit = kernel.max_wg && kernel.max_wg < q->max_wg ? kernel.max_wg : q->max_wg;
  if (wg > limit) {
    report(uc, std::string("kernel ") + entry + ": work-group of " + std::to_string(wg) + " exceeds the limit (" +
                   std::to_string(limit) + ")");
    return halide_error_code_device_run_failed;
  }
  g.unlock();
  int n = 0;
  while (arg_sizes[n]) n++;
  std::vector<void *> values(n + 1);
  std::vector<int> types(n + 1);
  LocalAccessor shared;
  for (int i = 0; i < n; i++) {
    if (arg_is_buffer[i]) {
      values[i] = reinterpret_cast<void *>(*static_cast<uint64_t *>(args[i]));
      types[i] = kVoidPtr;
    } else {
      values[i] = args[i];
      switch (arg_sizes[i]) {
        case 1: types[i] = kInt8; break;
        case 2: types[i] = kInt16; break;
        case 4: types[i] = kInt32; break;
        case 8: types[i] = kInt64; break;
        default:
          report(uc, std::string("kernel ") + entry + ": unsupported scalar argument size " + std::to_string(arg_sizes[i]));
          return halide_error_code_device_run_failed;
      }
    }
  }
  // Halide's OpenCL kernels end with one `__local` parameter for all shared memory, unless prepare_source
  // dropped it as unused; sized by hx_local_bytes.
  size_t nargs = n;
  if (kernel.num_args > size_t(n)) {
    shared = LocalAccessor{1, 1 /* uint8 */, size_t(hx_local_bytes(shared_mem_bytes)), 1, 1};
    values[n] = &shared;
    types[n] = kLocalAccessor;
    nargs = n + 1;
  }
  // SYCL's last dimension is OpenCL's first: reverse Halide's (x, y, z).
  const size_t local[3] = {size_t(tz), size_t(ty), size_t(tx)};
  const size_t global[3] = {size_t(bz) * tz, size_t(by) * ty, size_t(bx) * tx};
  Ref ev = api.submit(kernel.ref, uc, values.data(), types.data(), nargs, global, local, 3, nullptr, 0);
  if (!ev) {
    std::string detail;
    for (int i = 0; i < n; i++) detail += " " + std::to_string(types[i]) + "/" + std::to_string(arg_sizes[i]);
    report(uc, std::string("submitting kernel ") + entry + " failed (global " + std::to_string(global[2]) + "x" +
                   std::to_string(global[1]) + "x" + std::to_string(global[0]) + ", work-group " + std::to_string(tx) +
                   "x" + std::to_string(ty) + "x" + std::to_string(tz) + ", argument types/sizes" + detail + ")");
    return halide_error_code_device_run_failed;
  }
  api.event_delete(ev);
  n_launches++;
  return 0;
}

}  // extern "C"
