// benanza harness, bz::PlanStore: the files under the per-system plan cache (cudnn_graph.h's
// PlanBuilder keeps runtime-compiled execution plans there, so a later process, run or model
// with the same graph and engine config loads the compiled kernel instead of compiling it again:
// seconds of NVRTC per config). Plain C++17 and no CUDA, so the host compiler tests it alone.
//
// An entry is one file, <dir>/<2 hex>/<14 hex>.plan, named by the 64-bit FNV-1a hash of its key
// and holding the whole key before its value: a lookup compares the key, so a hash collision, a
// truncated or foreign file reads as a miss, never as another graph's plan. Entries are written to
// a file of their own and renamed into place, so concurrent writers (threads, processes, a
// cluster's workers on one host) and readers never see half an entry. Every I/O failure is a miss
// or an entry not kept: the store can only save a build, never fail one. A hit marks its file used
// (its mtime), so the runner's pruning (benanza/measure/plan_cache.py) drops the least used first.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <unistd.h>

namespace bz {

class PlanStore {
 public:
  // The store's directory from the environment: $BENANZA_PLAN_CACHE_DIR ("off": no store), else
  // $XDG_CACHE_HOME/benanza/plans, else $HOME/.cache/benanza/plans (benanza's cache, paths.py);
  // empty when there is none.
  static std::filesystem::path default_dir() {
    const char* given = std::getenv("BENANZA_PLAN_CACHE_DIR");
    if (given && *given) return std::string(given) == "off" ? std::filesystem::path() : std::filesystem::path(given);
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    if (xdg && *xdg) return std::filesystem::path(xdg) / "benanza" / "plans";
    const char* home = std::getenv("HOME");
    if (home && *home) return std::filesystem::path(home) / ".cache" / "benanza" / "plans";
    return {};
  }

  explicit PlanStore(std::filesystem::path dir) : dir_(std::move(dir)) {}
  bool enabled() const { return !dir_.empty(); }

  static uint64_t fnv1a(const std::string& text) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : text) {
      h ^= c;
      h *= 1099511628211ull;
    }
    return h;
  }

  std::filesystem::path path_of(const std::string& key) const {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(key)));
    const std::string name(hex);
    return dir_ / name.substr(0, 2) / (name.substr(2) + ".plan");
  }

  // The value stored under `key`; nothing on a miss (no file, another key's file, a short one).
  std::optional<std::string> get(const std::string& key) const {
    if (!enabled()) return std::nullopt;
    const std::filesystem::path path = path_of(key);
    std::error_code ec;
    const uintmax_t file_size = std::filesystem::file_size(path, ec);
    std::ifstream in(path, std::ios::binary);
    if (ec || !in) return std::nullopt;
    std::string magic;
    size_t key_size = 0, value_size = 0;
    if (!std::getline(in, magic) || magic != kMagic || !(in >> key_size >> value_size) || in.get() != '\n')
      return std::nullopt;
    // the header's sizes must account for the file exactly: a header that lies is a miss, not a huge read
    const std::streamoff header = in.tellg();
    if (key_size != key.size() || header < 0 || value_size > file_size ||
        uintmax_t(header) + key_size + value_size != file_size)
      return std::nullopt;
    std::string stored(key_size, '\0');
    if (!in.read(stored.data(), std::streamsize(key_size)) || stored != key) return std::nullopt;
    std::string value(value_size, '\0');
    if (!in.read(value.data(), std::streamsize(value_size))) return std::nullopt;
    // used now: the last to go when the cache is pruned (plan_cache.py)
    std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now(), ec);
    return value;
  }

  // Keeps `value` under `key` (replacing what was there); false when it could not be written.
  bool put(const std::string& key, const std::string& value) const {
    if (!enabled()) return false;
    const std::filesystem::path path = path_of(key);
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) return false;
    std::ostringstream tmp_name;
    tmp_name << path.filename().string() << ".tmp." << ::getpid() << "." << std::this_thread::get_id();
    const std::filesystem::path tmp = path.parent_path() / tmp_name.str();
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << kMagic << '\n' << key.size() << ' ' << value.size() << '\n';
      out.write(key.data(), std::streamsize(key.size()));
      out.write(value.data(), std::streamsize(value.size()));
      out.flush();
      if (!out) {
        out.close();
        std::filesystem::remove(tmp, ec);
        return false;
      }
    }
    std::filesystem::rename(tmp, path, ec);
    if (!ec) return true;
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return false;
  }

 private:
  static constexpr const char* kMagic = "benanza-plan 1";
  std::filesystem::path dir_;
};

}  // namespace bz
