// benanza._native: the system fingerprint that every measurement is stored under.
//
// Links only the CUDA runtime. cuDNN and cuBLAS are found with dlopen at call time
// (the same sonames the generated benchmarks load), so this module builds and
// imports on a machine without them, and without a GPU: device_info() then says
// usable=False with the CUDA error text instead of failing.
#include <cuda_runtime.h>
#include <library_types.h>
#include <dlfcn.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

std::string cuda_error_text(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string(what) + " failed: " + cuda_error_text(err));
  }
}

// Integer device attributes reported by device_info(), as data: name -> attribute.
// Clock rates come from here because CUDA 13 removed them from cudaDeviceProp.
const std::vector<std::pair<const char*, cudaDeviceAttr>>& attribute_table() {
  static const std::vector<std::pair<const char*, cudaDeviceAttr>> table = {
      {"sm_count", cudaDevAttrMultiProcessorCount},
      {"cc_major", cudaDevAttrComputeCapabilityMajor},
      {"cc_minor", cudaDevAttrComputeCapabilityMinor},
      {"sm_clock_khz", cudaDevAttrClockRate},
      {"mem_clock_khz", cudaDevAttrMemoryClockRate},
      {"bus_width_bits", cudaDevAttrGlobalMemoryBusWidth},
      {"l2_bytes", cudaDevAttrL2CacheSize},
      {"max_persisting_l2_bytes", cudaDevAttrMaxPersistingL2CacheSize},
      {"shared_memory_per_sm_bytes", cudaDevAttrMaxSharedMemoryPerMultiprocessor},
      {"max_threads_per_sm", cudaDevAttrMaxThreadsPerMultiProcessor},
      {"ecc_enabled", cudaDevAttrEccEnabled},
      {"pci_bus_id", cudaDevAttrPciBusId},
      {"pci_device_id", cudaDevAttrPciDeviceId},
  };
  return table;
}

py::dict device_info(int device) {
  py::dict info;
  info["usable"] = false;
  info["device"] = device;
  int runtime = 0;
  int driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);  // 0 when no driver is installed
  info["cuda_runtime"] = runtime;
  info["cuda_driver"] = driver;

  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    info["reason"] = "cudaGetDeviceCount: " + cuda_error_text(err);
    return info;
  }
  info["device_count"] = count;
  if (device < 0 || device >= count) {
    info["reason"] = "device " + std::to_string(device) + " does not exist (" + std::to_string(count) +
                     " CUDA devices)";
    return info;
  }
  cudaDeviceProp prop{};
  err = cudaGetDeviceProperties(&prop, device);
  if (err != cudaSuccess) {
    info["reason"] = "cudaGetDeviceProperties: " + cuda_error_text(err);
    return info;
  }
  info["gpu"] = std::string(prop.name);
  info["memory_bytes"] = static_cast<unsigned long long>(prop.totalGlobalMem);
  char uuid[64];
  const unsigned char* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  std::snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
                u[15]);
  info["uuid"] = std::string(uuid);
  for (const auto& [name, attr] : attribute_table()) {
    int value = 0;
    err = cudaDeviceGetAttribute(&value, attr, device);
    if (err == cudaSuccess) {
      info[name] = value;
    } else {
      cudaGetLastError();  // clear it: an attribute this GPU lacks is not an error of the fingerprint
      info[name] = py::none();
    }
  }
  info["usable"] = true;
  return info;
}

// Device-to-device copy of `bytes`, `reps` times between two events: GB/s counts the
// bytes read plus the bytes written (2 * bytes per copy).
py::dict measure_bandwidth(std::size_t bytes, int reps, int device) {
  if (bytes == 0 || reps <= 0) throw std::invalid_argument("bytes and reps must be positive");
  float ms = 0.0f;
  {
    py::gil_scoped_release release;
    check(cudaSetDevice(device), "cudaSetDevice");
    void* src = nullptr;
    void* dst = nullptr;
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
    auto cleanup = [&]() {
      if (src) cudaFree(src);
      if (dst) cudaFree(dst);
      if (start) cudaEventDestroy(start);
      if (stop) cudaEventDestroy(stop);
    };
    try {
      check(cudaMalloc(&src, bytes), "cudaMalloc");
      check(cudaMalloc(&dst, bytes), "cudaMalloc");
      check(cudaMemset(src, 0x5a, bytes), "cudaMemset");
      check(cudaEventCreate(&start), "cudaEventCreate");
      check(cudaEventCreate(&stop), "cudaEventCreate");
      for (int i = 0; i < 2; ++i) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice), "warm-up copy");
      check(cudaEventRecord(start), "cudaEventRecord");
      for (int i = 0; i < reps; ++i) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice), "copy");
      check(cudaEventRecord(stop), "cudaEventRecord");
      check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    } catch (...) {
      cleanup();
      throw;
    }
    cleanup();
  }
  py::dict out;
  out["bytes"] = static_cast<unsigned long long>(bytes);
  out["reps"] = reps;
  out["ms"] = ms;
  out["bandwidth_gbs"] = ms > 0 ? 2.0 * static_cast<double>(bytes) * reps / (static_cast<double>(ms) * 1e6) : 0.0;
  return out;
}

// dlopen `soname` from the default search path (LD_LIBRARY_PATH, rpath, ld.so.cache),
// then from each of `dirs`. Returns the handle or nullptr; `tried` collects the errors.
void* open_library(const std::string& soname, const std::vector<std::string>& dirs, std::string& tried) {
  void* handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle) return handle;
  tried = dlerror();
  for (const auto& dir : dirs) {
    std::string path = dir + "/" + soname;
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) return handle;
    tried += "; ";
    tried += dlerror();
  }
  return nullptr;
}

std::string symbol_file(void* symbol) {
  Dl_info dl{};
  if (symbol && dladdr(symbol, &dl) && dl.dli_fname) return dl.dli_fname;
  return "";
}

py::dict library_versions(const std::vector<std::string>& dirs) {
  py::dict out;
  std::string tried;

  if (void* cudnn = open_library("libcudnn.so.9", dirs, tried)) {
    using get_version_t = std::size_t (*)();
    auto get_version = reinterpret_cast<get_version_t>(dlsym(cudnn, "cudnnGetVersion"));
    if (get_version) {
      out["cudnn_version"] = static_cast<unsigned long long>(get_version());
      out["cudnn_path"] = symbol_file(reinterpret_cast<void*>(get_version));
    } else {
      out["cudnn_error"] = "cudnnGetVersion not found in libcudnn.so.9";
    }
  } else {
    out["cudnn_error"] = tried;
  }

  tried.clear();
  if (void* cublas = open_library("libcublas.so.13", dirs, tried)) {
    using get_property_t = int (*)(libraryPropertyType, int*);
    auto get_property = reinterpret_cast<get_property_t>(dlsym(cublas, "cublasGetProperty"));
    int major = 0, minor = 0, patch = 0;
    if (get_property && get_property(MAJOR_VERSION, &major) == 0 && get_property(MINOR_VERSION, &minor) == 0 &&
        get_property(PATCH_LEVEL, &patch) == 0) {
      out["cublas_version"] = major * 10000 + minor * 100 + patch;
      out["cublas_path"] = symbol_file(reinterpret_cast<void*>(get_property));
    } else {
      out["cublas_error"] = "cublasGetProperty not found or failed in libcublas.so.13";
    }
  } else {
    out["cublas_error"] = tried;
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "benanza system fingerprint: CUDA device attributes, measured bandwidth, cuDNN/cuBLAS versions";
  m.def("device_info", &device_info, py::arg("device") = 0,
        "Device attributes as a dict; usable=False and reason=<CUDA error> when no GPU can be used.");
  m.def("measure_bandwidth", &measure_bandwidth, py::arg("bytes") = std::size_t(1) << 30, py::arg("reps") = 20,
        py::arg("device") = 0, "Device-to-device copy bandwidth in GB/s (bytes read + written) timed with events.");
  m.def("library_versions", &library_versions, py::arg("dirs") = std::vector<std::string>{},
        "cuDNN and cuBLAS versions (and the files loaded) found by dlopen, default search path first.");
  m.attr("CUDART_VERSION") = CUDART_VERSION;
}
