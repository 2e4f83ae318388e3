#pragma once
/// Errors shared by every layer of troupe.
///
/// Two tiers (see docs/errors.md):
///  - `troupe::error` for input the user can fix (a config field, a data file, a flag); the
///    message names the thing and what was expected. Thrown outside actors, turned into one
///    line and a non-zero exit by `main`.
///  - `TROUPE_ENFORCE(cond, ...)` for broken invariants: the message carries file:line, the
///    failed condition and the operand values streamed after it.

#include <sstream>
#include <stdexcept>
#include <string>

namespace troupe {

/// An error the user can act on; what() is a complete one-line explanation.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

[[noreturn]] void enforce_failed(const char* file, int line, const char* condition,
                                 const std::string& details);

}  // namespace detail

/// Builds a troupe::error from streamable parts.
template <class... Parts>
error make_error(const Parts&... parts) {
  return error(detail::concat(parts...));
}

}  // namespace troupe

/// Checks an invariant; on failure throws troupe::error with file:line, the condition text and
/// the streamed values, e.g. TROUPE_ENFORCE(n > 0, "n=", n).
#define TROUPE_ENFORCE(condition, ...)                                                    \
  do {                                                                                    \
    if (!(condition))                                                                     \
      ::troupe::detail::enforce_failed(__FILE__, __LINE__, #condition,                    \
                                       ::troupe::detail::concat(__VA_ARGS__));            \
  } while (false)
