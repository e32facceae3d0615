// benanza harness: one JSON object per stdout line, flushed at once.
//
// The runner reads stdout line by line and may kill a hung process at any time,
// so nothing is ever buffered across lines.  Non-finite numbers are written as
// null (JSON has no NaN).
#pragma once

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

namespace bz {

class Json {
 public:
  Json& add(const char* key, const std::string& v) { return raw(key, quote(v)); }
  Json& add(const char* key, const char* v) { return raw(key, quote(v ? v : "")); }
  Json& add(const char* key, bool v) { return raw(key, v ? "true" : "false"); }
  Json& add(const char* key, int v) { return raw(key, std::to_string(v)); }
  Json& add(const char* key, long v) { return raw(key, std::to_string(v)); }
  Json& add(const char* key, long long v) { return raw(key, std::to_string(v)); }
  Json& add(const char* key, unsigned long v) { return raw(key, std::to_string(v)); }
  Json& add(const char* key, unsigned long long v) { return raw(key, std::to_string(v)); }
  Json& add(const char* key, double v) { return raw(key, number(v)); }
  template <class T>
  Json& add(const char* key, const std::optional<T>& v) {
    return v ? add(key, *v) : raw(key, "null");
  }
  // A value that is already JSON text (a nested object or array).
  Json& raw(const char* key, const std::string& json) {
    body_ += body_.empty() ? "" : ",";
    body_ += quote(key) + ":" + json;
    return *this;
  }
  std::string str() const { return "{" + body_ + "}"; }

  static std::string number(double v) {
    if (!std::isfinite(v)) return "null";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
  }
  static std::string quote(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c < 0x20 || c == 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
    }
    return out + "\"";
  }

 private:
  std::string body_;
};

// Print one protocol line and flush it.
inline void emit(const Json& j) {
  std::string line = j.str() + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

}  // namespace bz
