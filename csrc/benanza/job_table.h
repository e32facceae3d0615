// benanza harness: the job table, read at run time (docs/GENERATOR.md "Job tables").
//
// A generated executable's source depends only on its template, so the same executable serves
// every project (benanza/build_cache.py); its jobs come from a text file that `benanza generate`
// writes beside the source (src/bench_<api>.jobs) and the build puts beside the executable:
//
//   # comment lines (the command that wrote it)
//   benanza-job-table <TAB> 1 <TAB> <api> <TAB> <number of jobs>
//   <column name> <TAB> <column name> ...            (must equal the executable's columns)
//   <cell> <TAB> <cell> ...                           (one line per job, in job order)
//
// Cells, by the column's kind (benanza/job_table.py writes them): text is percent-encoded (every
// byte outside [A-Za-z0-9_.:+=,*/-] as %XX), so model text never holds a tab, a newline or a
// quote here; integers and reals are plain decimal (reals may be inf / -inf, never nan); a flag
// is 0 or 1; lists are space-separated; a choice is one name of the column's vocabulary (the
// enum spellings the template compiles in).  Anything else is refused with one line naming the
// file, the line and the column.  Host code only: no CUDA here (tests build it with g++).
#pragma once

#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace bz {

constexpr const char kTableMagic[] = "benanza-job-table";
constexpr int kTableFormat = 1;

// What a column holds (benanza/job_table.py Kind, in that order).
enum class Cell { Text, Int, Real, Real32, Flag, Ints, Choice, Choices, Texts, Reals };

struct Column {
  const char* name;
  Cell kind;
  int min_count = 1;                  // lists: how many items (Ints, Choices, Texts, Reals)
  int max_count = 1;
  const char* const* words = nullptr;  // Choice, Choices: the vocabulary's names
  int num_words = 0;
};

// One line of a table that cannot be used: "FILE:LINE: column 'x': why".
class TableError : public std::runtime_error {
 public:
  explicit TableError(const std::string& message) : std::runtime_error(message) {}
};

namespace table_detail {

inline bool plain(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         (c != 0 && std::strchr("_.:+=,*/-", c));
}

inline int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    size_t next = s.find(sep, pos);
    out.push_back(s.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) return out;
    pos = next + 1;
  }
}

// Items of a list cell: single spaces between items, none at either end; "" is no items.
inline bool items(const std::string& cell, std::vector<std::string>& out) {
  out.clear();
  if (cell.empty()) return true;
  out = split(cell, ' ');
  for (const std::string& item : out)
    if (item.empty()) return false;
  return true;
}

}  // namespace table_detail

// Percent-encoded text -> its bytes; false on a byte that should have been encoded or a bad %XX.
inline bool decode_text(const std::string& cell, std::string& out) {
  out.clear();
  for (size_t i = 0; i < cell.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(cell[i]);
    if (c == '%') {
      if (i + 2 >= cell.size()) return false;
      const int a = table_detail::hex(cell[i + 1]), b = table_detail::hex(cell[i + 2]);
      if (a < 0 || b < 0) return false;
      out += static_cast<char>(a * 16 + b);
      i += 2;
    } else if (table_detail::plain(c)) {
      out += static_cast<char>(c);
    } else {
      return false;
    }
  }
  return true;
}

// One job: its cells parsed by their columns' kinds; the template's load() reads them by column index.
class JobRow {
 public:
  JobRow(const std::string& where, const Column* columns, size_t num_columns)
      : where_(where), columns_(columns), texts_(num_columns), numbers_(num_columns), reals_(num_columns),
        lists_(num_columns), text_lists_(num_columns), real_lists_(num_columns) {}

  // Throws this row's TableError about column `c`.
  [[noreturn]] void fail(size_t c, const std::string& why) const {
    throw TableError(where_ + ": column '" + columns_[c].name + "': " + why);
  }

  const std::string& text(size_t c) const { return kind(c, Cell::Text), texts_[c]; }
  long long integer(size_t c) const { return kind(c, Cell::Int), numbers_[c]; }
  int int32(size_t c) const { return kind(c, Cell::Int), in_range<int>(c, numbers_[c]); }
  bool flag(size_t c) const { return kind(c, Cell::Flag), numbers_[c] != 0; }
  double real(size_t c) const { return kind(c, Cell::Real), reals_[c]; }
  float real32(size_t c) const { return kind(c, Cell::Real32), float(reals_[c]); }
  int choice(size_t c) const { return kind(c, Cell::Choice), int(numbers_[c]); }  // index into the vocabulary
  // An Int column that indexes a table of `n` rows (a job's precision).
  int index(size_t c, size_t n) const {
    const long long v = integer(c);
    if (v < 0 || v >= (long long)n) fail(c, std::to_string(v) + " is not below " + std::to_string(n));
    return int(v);
  }
  const std::string& choice_name(size_t c) const { return kind(c, Cell::Choice), texts_[c]; }
  const std::vector<long long>& integers(size_t c) const { return kind(c, Cell::Ints), lists_[c]; }
  const std::vector<long long>& choices(size_t c) const { return kind(c, Cell::Choices), lists_[c]; }
  const std::vector<std::string>& texts(size_t c) const { return kind(c, Cell::Texts), text_lists_[c]; }
  const std::vector<double>& reals(size_t c) const { return kind(c, Cell::Reals), real_lists_[c]; }
  // `v` of column `c` as an integer type U, refused when it does not fit.
  template <class U>
  U in_range(size_t c, long long v) const {
    static_assert(std::is_integral_v<U>, "an integer type");
    const bool fits = std::is_signed_v<U> ? v >= (long long)std::numeric_limits<U>::min() &&
                                                v <= (long long)std::numeric_limits<U>::max()
                                          : v >= 0 && (unsigned long long)v <= std::numeric_limits<U>::max();
    if (!fits) fail(c, std::to_string(v) + " does not fit its field");
    return U(v);
  }

  // Parse cell `c` (its raw text) by its column's kind.
  void parse(size_t c, const std::string& cell) {
    const Column& col = columns_[c];
    switch (col.kind) {
      case Cell::Text:
        if (!decode_text(cell, texts_[c])) fail(c, "not percent-encoded text: " + shown(cell));
        return;
      case Cell::Int:
      case Cell::Flag:
        numbers_[c] = parse_int(c, cell);
        if (col.kind == Cell::Flag && numbers_[c] != 0 && numbers_[c] != 1) fail(c, "expected 0 or 1, got " + shown(cell));
        return;
      case Cell::Real:
      case Cell::Real32:
        reals_[c] = parse_real(c, cell, col.kind == Cell::Real32);
        return;
      case Cell::Choice:
        numbers_[c] = word(c, cell);
        texts_[c] = cell;
        return;
      case Cell::Ints:
      case Cell::Choices:
      case Cell::Texts:
      case Cell::Reals: {
        std::vector<std::string> parts;
        if (!table_detail::items(cell, parts)) fail(c, "items must be separated by single spaces: " + shown(cell));
        if (int(parts.size()) < col.min_count || int(parts.size()) > col.max_count)
          fail(c, "expected " + count_text(col) + " items, got " + std::to_string(parts.size()));
        for (const std::string& p : parts) {
          if (col.kind == Cell::Ints) lists_[c].push_back(parse_int(c, p));
          if (col.kind == Cell::Choices) lists_[c].push_back(word(c, p));
          if (col.kind == Cell::Reals) real_lists_[c].push_back(parse_real(c, p, false));
          if (col.kind == Cell::Texts) {
            std::string t;
            if (!decode_text(p, t)) fail(c, "not percent-encoded text: " + shown(p));
            text_lists_[c].push_back(t);
          }
        }
        return;
      }
    }
  }

 private:
  void kind(size_t c, Cell k) const {
    if (columns_[c].kind != k) fail(c, "read as another kind than the executable declares (a template bug)");
  }
  static std::string shown(const std::string& cell) { return "'" + cell.substr(0, 60) + "'"; }
  static std::string count_text(const Column& col) {
    return col.min_count == col.max_count ? std::to_string(col.min_count)
                                          : std::to_string(col.min_count) + " to " + std::to_string(col.max_count);
  }
  long long parse_int(size_t c, const std::string& cell) const {
    if (cell.empty() || cell.size() > 20) fail(c, "expected an integer, got " + shown(cell));
    const char* s = cell.c_str();
    if (!(std::isdigit(static_cast<unsigned char>(s[0])) || (s[0] == '-' && std::isdigit(static_cast<unsigned char>(s[1])))))
      fail(c, "expected an integer, got " + shown(cell));
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s, &end, 10);
    if (*end != '\0' || errno == ERANGE) fail(c, "expected an integer, got " + shown(cell));
    return v;
  }
  // Decimal as Python's repr writes it, or inf / -inf; float columns round once, as a literal `1.5f` does.
  double parse_real(size_t c, const std::string& cell, bool single) const {
    if (cell == "inf" || cell == "-inf") {
      if (single) fail(c, "expected a finite number, got " + shown(cell));
      return cell[0] == '-' ? -HUGE_VAL : HUGE_VAL;
    }
    for (char ch : cell)
      if (!(std::isdigit(static_cast<unsigned char>(ch)) || (ch != 0 && std::strchr("+-.e", ch))))
        fail(c, "expected a number, got " + shown(cell));
    if (cell.empty()) fail(c, "expected a number, got ''");
    char* end = nullptr;
    errno = 0;
    const double v = single ? double(std::strtof(cell.c_str(), &end)) : std::strtod(cell.c_str(), &end);
    if (*end != '\0' || !std::isfinite(v)) fail(c, "expected a finite number, got " + shown(cell));
    return v;
  }
  long long word(size_t c, const std::string& name) const {
    const Column& col = columns_[c];
    for (int w = 0; w < col.num_words; ++w)
      if (name == col.words[w]) return w;
    fail(c, "unknown name " + shown(name) + " (regenerate the project with this benanza)");
  }

  std::string where_;
  const Column* columns_;
  std::vector<std::string> texts_;
  std::vector<long long> numbers_;
  std::vector<double> reals_;
  std::vector<std::vector<long long>> lists_;
  std::vector<std::vector<std::string>> text_lists_;
  std::vector<std::vector<double>> real_lists_;
};

namespace table_detail {

// One integer of a list, converted to whichever integer field of an aggregate it initializes.
struct Narrowing {
  const JobRow& row;
  size_t column;
  long long value;
  template <class U, class = std::enable_if_t<std::is_integral_v<U>>>
  operator U() const { return row.in_range<U>(column, value); }
};

template <class T, size_t... I>
T aggregate(const JobRow& row, size_t c, const std::vector<long long>& v, std::index_sequence<I...>) {
  return T{Narrowing{row, c, v[I]}...};
}

}  // namespace table_detail

// The N integers of list column `c` as a struct of N integer fields (bz::ConvDims, bz::GemmDims ...),
// each checked to fit its field.
template <class T, size_t N>
T aggregate_of(const JobRow& row, size_t c) {
  const std::vector<long long>& v = row.integers(c);
  if (v.size() != N) row.fail(c, "expected " + std::to_string(N) + " integers, got " + std::to_string(v.size()));
  return table_detail::aggregate<T>(row, c, v, std::make_index_sequence<N>{});
}

// Read the table at `path` for `api` with `columns`; once every line is checked, call load(row) for
// each job in order (load may call row.fail).  Throws TableError naming the file, the line and the column.
template <class Load>
void read_job_table(const std::string& path, const char* api, const Column* columns, size_t num_columns,
                    Load&& load) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw TableError(path + ": cannot read the job table (" + std::strerror(errno) +
                     "; the build puts bench_<api>.jobs beside the executable, --table FILE names another)");
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string data = buf.str();
  if (data.empty() || data.back() != '\n') throw TableError(path + ": the job table does not end in a newline (cut short?)");
  std::vector<std::string> lines = table_detail::split(data.substr(0, data.size() - 1), '\n');
  long long declared = -1;
  std::vector<JobRow> rows;  // every line checked before the first job is loaded
  bool columns_seen = false;
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string& line = lines[n];
    const std::string where = path + ":" + std::to_string(n + 1);
    for (unsigned char ch : line)
      if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
        throw TableError(where + ": a control character in the line (byte " + std::to_string(int(ch)) + ")");
    if (line.empty()) throw TableError(where + ": an empty line");
    if (line[0] == '#') {
      if (declared >= 0) throw TableError(where + ": a comment after the header");
      continue;
    }
    const std::vector<std::string> cells = table_detail::split(line, '\t');
    if (declared < 0) {  // the header: magic, format, api, number of jobs
      char* end = nullptr;
      if (cells.size() != 4 || cells[0] != kTableMagic)
        throw TableError(where + ": not a benanza job table (no '" + kTableMagic + "' header)");
      if (cells[1] != std::to_string(kTableFormat))
        throw TableError(where + ": job table format " + cells[1] + ", this executable reads " +
                         std::to_string(kTableFormat) + " (regenerate and rebuild the project)");
      std::string named;
      if (!decode_text(cells[2], named) || named != api)
        throw TableError(where + ": a job table of " + cells[2] + ", this executable measures " + api);
      declared = std::strtoll(cells[3].c_str(), &end, 10);
      if (cells[3].empty() || *end != '\0' || declared < 0 || declared > INT_MAX)
        throw TableError(where + ": bad number of jobs '" + cells[3] + "'");
      continue;
    }
    if (!columns_seen) {
      std::string want, got;
      for (size_t c = 0; c < num_columns; ++c) want += (c ? " " : "") + std::string(columns[c].name);
      for (size_t c = 0; c < cells.size(); ++c) got += (c ? " " : "") + cells[c];
      if (want != got)
        throw TableError(where + ": columns '" + got + "', this executable reads '" + want +
                         "' (regenerate and rebuild the project)");
      columns_seen = true;
      continue;
    }
    if (cells.size() != num_columns)
      throw TableError(where + ": " + std::to_string(cells.size()) + " cells, expected " +
                       std::to_string(num_columns) + " (tab-separated)");
    if ((long long)rows.size() >= declared)
      throw TableError(where + ": more jobs than the header's " + std::to_string(declared));
    rows.emplace_back(where, columns, num_columns);
    for (size_t c = 0; c < num_columns; ++c) rows.back().parse(c, cells[c]);
  }
  if (!columns_seen) throw TableError(path + ": no header and column line");
  if ((long long)rows.size() != declared)
    throw TableError(path + ": " + std::to_string(rows.size()) + " jobs, the header declares " +
                     std::to_string(declared) + " (cut short?)");
  for (const JobRow& row : rows) load(row);
}

}  // namespace bz
