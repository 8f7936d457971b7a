// anvil errors: every failure is an exception that names the op, what was expected, what came, and where.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace anvil {

class Error : public std::runtime_error {
 public:
  Error(std::string op, std::string expected, std::string got, const char* file, int line)
      : std::runtime_error(format(op, expected, got, file, line)),
        op_(std::move(op)), expected_(std::move(expected)), got_(std::move(got)), file_(file), line_(line) {}
  const std::string& op() const { return op_; }
  const std::string& expected() const { return expected_; }
  const std::string& got() const { return got_; }
  const char* file() const { return file_; }
  int line() const { return line_; }

 private:
  static std::string format(const std::string& op, const std::string& expected, const std::string& got,
                            const char* file, int line) {
    std::ostringstream s;
    s << op << ": expected " << expected << ", got " << got << " (" << file << ":" << line << ")";
    return s.str();
  }
  std::string op_, expected_, got_;
  const char* file_;
  int line_;
};

// Streams any printable values into one string: str("[", n, "]").
template <class... Args>
std::string str(const Args&... args) {
  std::ostringstream s;
  (s << ... << args);
  return s.str();
}

}  // namespace anvil

// op, expected and got may be any printable values (strings, numbers).
#define ANVIL_THROW(op, expected, got) \
  throw ::anvil::Error(::anvil::str(op), ::anvil::str(expected), ::anvil::str(got), __FILE__, __LINE__)
// ANVIL_CHECK(cond, op, expected, got): expected/got are only evaluated on failure.
#define ANVIL_CHECK(cond, op, expected, got) \
  do {                                       \
    if (!(cond)) ANVIL_THROW(op, expected, got); \
  } while (0)
